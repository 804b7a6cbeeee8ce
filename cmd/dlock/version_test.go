package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionString(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			"dlock v1.2.3, go1.26.0"},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", "509a66c", "vcs.time", "2026-05-01T10:00:00Z", "vcs.modified", "false")},
			"dlock (devel), revision 509a66c (2026-05-01T10:00:00Z), go1.26.0"},
		{"changed checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "509a66c", "vcs.modified", "true")},
			"dlock (devel), revision 509a66c, modified, go1.26.0"},
		{"no version", &debug.BuildInfo{}, "dlock (unknown)"},
	} {
		if got := version(tc.info, true); got != tc.want {
			t.Errorf("%s: version = %q; want %q", tc.name, got, tc.want)
		}
	}
	if got := version(nil, false); !strings.Contains(got, "no build information") {
		t.Errorf("version without build info = %q; want it to say so", got)
	}
}

// TestVersionCommand: the binary built by TestMain reports the version
// and commit the go command stamped into it (no commit when it was built
// with -buildvcs=false, or from a git worktree, which go does not read).
func TestVersionCommand(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	require.NoError(t, err, "go version -m")
	want := []string{"dlock "}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			want = append(want, "dlock "+f[2])
		case len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			want = append(want, "revision "+strings.TrimPrefix(f[1], "vcs.revision="))
		}
	}
	for _, arg := range []string{"--version", "version", "-version"} {
		r := runBin(t, nil, arg)
		if r.code != exitOK || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("dlock %s: %v; want one line on stdout", arg, r)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("dlock %s printed %q; want %q in it", arg, r.stdout, w)
			}
		}
	}
}
