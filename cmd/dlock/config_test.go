package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// writeConfig writes a --config file with body and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dlock.conf")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestRunConfigMistakes: a configuration that cannot work is a usage
// error (64), said in the caller's words, before any server is tried.
func TestRunConfigMistakes(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, "url = redis://127.0.0.1:1\n")
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"port not a number", []string{"--url", "redis://127.0.0.1:notaport"}, "port"},
		{"port out of range", []string{"--url", "redis://127.0.0.1:99999"}, "port"},
		{"port out of range in addrs", []string{"--addrs", "127.0.0.1:99999"}, "65535"},
		{"port in a quorum", []string{"--url", "quorum://127.0.0.1:1,127.0.0.1:70000,127.0.0.1:3"}, "port"},
		{"config and url", []string{"--config", file, "--url", "redis://127.0.0.1:1"}, "--config"},
		{"config and addrs", []string{"--config", file, "--addrs", "127.0.0.1:1"}, "--config"},
		{"durations", []string{"--url", "quorum://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?ttl=1s&node_timeout=600ms"}, "600ms"},
		// A setting's flag reads and checks its value as the URL's
		// parameter does, and a rule it breaks blames the flag.
		{"ttl flag", []string{"--ttl", "-1s", "--addrs", "127.0.0.1:1"}, "invalid TTL -1s"},
		{"node timeout flag", []string{"--url", "quorum://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?ttl=1s", "--node-timeout", "600ms"},
			"--node-timeout: dlock: invalid NodeTimeout 600ms"},
		{"replicas flag on a quorum", []string{"--url", "quorum://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--replicas", "1", "--replica-timeout", "1s"},
			"--replicas: dlock: invalid Replicas"},
		{"bad key in the file", []string{"--config", writeConfig(t, "url = redis://127.0.0.1:1\nidle_ttl = soon\n")}, "line 2: dlock: invalid IdleTTL"},
	} {
		args := append(append([]string{"run"}, tc.args...), "--key", "k", "--", "true")
		r := runBin(t, nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: %v; want exit %d and %q on stderr", tc.name, r, exitUsage, tc.want)
		}
	}
}

// TestRunAuthFailed: a wrong or missing password is reported as such,
// with exit 77 and the source of the servers, not as servers unavailable;
// for both strategies and both client libraries.
func TestRunAuthFailed(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		_, err := s.Do("ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all")
		require.NoError(t, err)
		addrs[i] = s.Addr()
	}
	single := "redis://" + addrs[0]
	quorum := "quorum://" + strings.Join(addrs, ",") + "?durable=true"
	for _, client := range redistest.Clients {
		for _, tc := range []struct {
			name, body string
			code       int
		}{
			{"single, wrong password", "url = " + single + "\nusername = alice\npassword = nope\n", exitAuth},
			{"quorum, wrong password", "url = " + quorum + "\nusername = alice\npassword = nope\n", exitAuth},
			{"single, right password", "url = " + single + "\nusername = alice\npassword = s3cret\n", exitOK},
			{"quorum, right password", "url = " + quorum + "\nusername = alice\npassword = s3cret\n", exitOK},
		} {
			file := writeConfig(t, tc.body)
			r := runBin(t, nil, "run", "--config", file, "--client", client, "--wait", "0", "--key", "auth", "--", "true")
			if r.code != tc.code {
				t.Errorf("%s, %s: %v; want exit %d", client, tc.name, r, tc.code)
				continue
			}
			if tc.code == exitAuth && (!strings.Contains(r.stderr, "authentication failed") || !strings.Contains(r.stderr, file) ||
				strings.Contains(r.stderr, "nope")) {
				t.Errorf("%s, %s: stderr %q; want authentication failed, the config file, and no password", client, tc.name, r.stderr)
			}
			want := tc.code
			if want == exitOK {
				want = exitNotHeld // inspect: nobody holds it
			}
			if r := runBin(t, nil, "inspect", "--config", file, "--client", client, "auth"); r.code != want {
				t.Errorf("%s, %s: inspect: %v; want exit %d", client, tc.name, r, want)
			}
			if tc.code == exitAuth {
				// A wait does not retry credentials every node refuses.
				start := time.Now()
				r := runBin(t, nil, "run", "--config", file, "--client", client, "--wait", "20s", "--key", "auth", "--", "true")
				if r.code != exitAuth || time.Since(start) > 10*time.Second {
					t.Errorf("%s, %s, --wait 20s: %v after %v; want exit %d before the wait ends", client, tc.name, r, time.Since(start), exitAuth)
				}
			}
		}
	}
}

// TestRunSaysWhichSourceWon: --config on the command line wins over
// $DLOCK_URL in the environment, and -v says so.
func TestRunSaysWhichSourceWon(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	file := writeConfig(t, "addrs = "+srv.Addr()+"\n")
	r := runBin(t, []string{"DLOCK_URL=redis://" + dead}, "run", "--config", file, "-v", "--key", "source", "--", "true")
	want := "servers from --config " + file + ", over $DLOCK_URL: single on " + srv.Addr() + " (go-redis)"
	if r.code != exitOK || !strings.Contains(r.stderr, want) {
		t.Errorf("%v; want exit 0 and %q on stderr", r, want)
	}

	// The environment alone, on a dead server: the error names it.
	r = runBin(t, []string{"DLOCK_URL=redis://" + dead}, "run", "--key", "source", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "servers from $DLOCK_URL") || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("%v; want exit %d naming $DLOCK_URL and the refusal", r, exitUnavailable)
	}
}

// TestRunSentinelAuthFailed: behind Sentinels, a password the master
// refuses and one the Sentinels refuse both exit 77, each saying who
// refused it.
func TestRunSentinelAuthFailed(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinels(t, 3, redistest.WithAuth("alice", "s3cret"), redistest.WithSentinelPassword("watch"))
	base := "redis+sentinel://alice:%s@" + strings.Join(g.Addrs(), ",") + "/" + g.Name + "?sentinel_password=%s"
	for _, client := range redistest.Clients {
		for _, tc := range []struct {
			name, data, sentinel, want string
			code                       int
		}{
			{"wrong data password", "nope", "watch", `master "` + g.Name + `" of the Sentinels`, exitAuth},
			{"wrong Sentinel password", "s3cret", "nope", "refused the Sentinel credentials", exitAuth},
			{"right passwords", "s3cret", "watch", "", exitOK},
		} {
			file := writeConfig(t, "url = "+fmt.Sprintf(base, tc.data, tc.sentinel)+"\n")
			r := runBin(t, nil, "run", "--config", file, "--client", client, "--wait", "0", "--key", "auth", "--", "true")
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "nope") {
				t.Errorf("%s, %s: %v; want exit %d, stderr with %q and no password", client, tc.name, r, tc.code, tc.want)
			}
		}
	}
}
