package redistest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
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

// TestInfoServerFields: the INFO server fields the library and the harness
// read (run_id and uptime_in_seconds by the quorum's lost-data guard,
// process_id by the readiness check) are there on every server; the mode
// field is the one that differs: Valkey 8 renamed redis_mode to
// server_mode.
func TestInfoServerFields(t *testing.T) {
	srv := redistest.Start(t)
	b := srv.Build()
	for _, f := range []string{"run_id", "uptime_in_seconds", "process_id", "redis_version"} {
		v, err := srv.Info(f)
		require.NoError(t, err)
		if v == "" {
			t.Errorf("INFO has no %s on %+v", f, b)
		}
	}
	mode, renamed := "redis_mode", "server_mode"
	if b.Name == "valkey" && !strings.HasPrefix(b.Version, "7.") {
		mode, renamed = renamed, mode
	}
	for f, want := range map[string]string{mode: "standalone", renamed: ""} {
		if v, err := srv.Info(f); err != nil || v != want {
			t.Errorf("INFO %s = %q, %v on %+v; want %q", f, v, err, b, want)
		}
	}
}
