package plant_test

import (
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/node"
)

// TestReplace: a script holding the edit's line runs rewritten, built
// once; a script a server runs after another is rewritten with its
// first; any other script runs as it is; a line its file no longer
// holds once fails the plant.
func TestReplace(t *testing.T) {
	const on, off = "    if attempts == 0 or st[6] ~= fmt(attempts) or st[7] ~= run then\n", "    if attempts == 0 then\n"
	swap, err := plant.UnraisedReaders()
	if err != nil {
		t.Fatal(err)
	}
	claim := node.NewScript("-- head\n" + on + "return 1\n")
	got := swap(claim)
	if want := "-- head\n" + off + "return 1\n"; got.Source() != want {
		t.Errorf("rewritten claim = %q; want %q", got.Source(), want)
	}
	if again := swap(claim); again != got {
		t.Errorf("second swap built another script")
	}
	other := node.NewScript("return 2\n")
	if swap(other) != other {
		t.Errorf("a script without the line was rewritten")
	}
	after := node.NewScriptAfter(node.NewScript("-- first\n"+on), "-- after\n"+on)
	b := swap(after)
	if b.Source() != "-- after\n"+off || b.First() == nil || b.First().Source() != "-- first\n"+off {
		t.Errorf("pair rewritten as %q after %v; want both lines off", b.Source(), b.First())
	}
	if _, err := plant.Replace(plant.Edit{File: "rwlock/lua/claim.lua", Old: "no such line", New: ""}); err == nil || !strings.Contains(err.Error(), "once") {
		t.Errorf("Replace of a missing line: err = %v; want it refused", err)
	}
}
