package election_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoClientLibraries: the package declares the two small interfaces it
// uses (Locker) rather than importing the root package, so a
// program that elects through its own Locker links neither client library.
func TestNoClientLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		if d == "github.com/dlockgo/dlock" || strings.HasPrefix(d, "github.com/redis/") || strings.HasPrefix(d, "github.com/valkey-io/") {
			t.Errorf("election depends on %s", d)
		}
	}
	t.Logf("%d packages in election's dependencies", len(deps))
}
