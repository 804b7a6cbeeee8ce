package lua_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	_ "github.com/dlockgo/dlock/claims"
	_ "github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine/lua"
	_ "github.com/dlockgo/dlock/internal/notice"
	_ "github.com/dlockgo/dlock/permits"
	_ "github.com/dlockgo/dlock/quorum"
	_ "github.com/dlockgo/dlock/ratelimit"
	_ "github.com/dlockgo/dlock/rwlock"
	_ "github.com/dlockgo/dlock/single"
)

var update = flag.Bool("update", false, "rewrite testdata/scripts.sha from the scripts as they are")

const golden = "testdata/scripts.sha"

// TestScriptsGolden: every production script, by name, has the SHA1 that
// testdata/scripts.sha records for it, and a script a server runs after
// another (node.NewScriptAfter) has that first one's. A change of any
// script's text, by its Lua or by how it is assembled, shows here as the
// list of scripts it changed; a change meant to be SHA-neutral must leave
// the file as it is. -update rewrites the file.
func TestScriptsGolden(t *testing.T) {
	var b strings.Builder
	for _, s := range lua.Scripts("") {
		b.WriteString(s.Name + " " + s.Script.SHA())
		if first := s.Script.First(); first != nil {
			b.WriteString(" after " + first.SHA())
		}
		b.WriteString("\n")
	}
	got := b.String()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gotLines, wantLines := lines(got), lines(string(want))
	for name, l := range wantLines {
		if g, ok := gotLines[name]; !ok {
			t.Errorf("%s: no longer registered", name)
		} else if g != l {
			t.Errorf("%s: %s; want %s", name, g, l)
		}
	}
	for name := range gotLines {
		if _, ok := wantLines[name]; !ok {
			t.Errorf("%s: registered, not in %s", name, golden)
		}
	}
}

// lines maps each line of a golden file to its name, the line's first
// field.
func lines(s string) map[string]string {
	out := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		name, rest, _ := strings.Cut(l, " ")
		out[name] = rest
	}
	return out
}
