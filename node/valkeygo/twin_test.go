package valkeygo_test

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite valkeygo.go from node/rueidis/rueidis.go")

// twinDoc is the package doc of the twin, in place of rueidis's.
const twinDoc = `// Code generated from node/rueidis/rueidis.go by TestTwin; DO NOT EDIT.

// Package valkeygo is the node.Node adapter for valkey-go clients
// (github.com/valkey-io/valkey-go), a fork of rueidis: it is
// node/rueidis with valkey-go's names, and shares the rest with it
// (node/internal/rueapi).
package valkeygo
`

// twin returns the valkey-go adapter made from the rueidis one, src: the
// same code with valkey-go's names. Each rule must apply: a rule that
// matches nothing means rueidis.go changed in a way the twin must be
// taught.
func twin(t *testing.T, src string) string {
	t.Helper()
	_, body, ok := strings.Cut(src, "\npackage rueidis\n")
	if !ok {
		t.Fatal("rueidis.go has no package clause after its doc")
	}
	for _, r := range [][2]string{
		{"(node/rueidis's TestSentinel)", "(the root package's TestOpenSentinel)"},
		{`"github.com/redis/rueidis"`, `"github.com/valkey-io/valkey-go"`},
		{"RedisResult", "ValkeyResult"},
		{"RedisMessage", "ValkeyMessage"},
		{"IsRedisNil", "IsValkeyNil"},
		{"IsRedisErr", "IsValkeyErr"},
		{`Name:    "rueidis"`, `Name:    "valkey"`},
		{"rueidis's", "valkey-go's"},
		{"rueidis writes", "valkey-go writes"},
		{"rueidis needs", "valkey-go needs"},
		{"rueidis.", "valkey."},
		{"node/valkeygo is generated from this file, with valkey-go's names (see\n// its TestTwin).", "This file is generated from node/rueidis/rueidis.go (see TestTwin)."},
	} {
		if !strings.Contains(body, r[0]) {
			t.Fatalf("rueidis.go no longer holds %q: teach TestTwin", r[0])
		}
		body = strings.ReplaceAll(body, r[0], r[1])
	}
	if strings.Contains(body, "rueidis") && !strings.Contains(body, "node/rueidis") {
		t.Fatalf("the twin still names rueidis:\n%s", body)
	}
	return twinDoc + body
}

// TestTwin: valkeygo.go is node/rueidis/rueidis.go with valkey-go's names,
// so that a fix to the adapter is made once, there. -update rewrites it.
func TestTwin(t *testing.T) {
	src, err := os.ReadFile("../rueidis/rueidis.go")
	if err != nil {
		t.Fatal(err)
	}
	want := twin(t, string(src))
	if *update {
		if err := os.WriteFile("valkeygo.go", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("valkeygo.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("valkeygo.go is not node/rueidis/rueidis.go with valkey-go's names: run go generate ./node/valkeygo (go test -run TestTwin -update)")
	}
}
