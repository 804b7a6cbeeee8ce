package redistest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
)

// TestBuild: the software INFO names is the one the binary's --version
// names, Redis or Valkey, at the same release. Valkey 7.2 names no
// software there ("Server v=7.2.7 ..."): only INFO tells it from Redis.
func TestBuild(t *testing.T) {
	srv := redistest.Start(t)
	b := srv.Build()
	bin, err := redisproc.ServerPath()
	require.NoError(t, err)
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	// "Redis server v=7.0.15 sha=...", "Valkey server v=8.0.1 sha=...",
	// "Server v=7.2.7 sha=..." (Valkey 7.2).
	want := strings.ToLower(strings.Fields(string(out))[0])
	if want == "server" && strings.HasPrefix(b.Version, "7.2.") {
		want = "valkey"
	}
	if b.Name != want || !strings.Contains(string(out), "v="+b.Version+" ") {
		t.Fatalf("Build() = %+v; the binary says %q", b, strings.TrimSpace(string(out)))
	}
}
