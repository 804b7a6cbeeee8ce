package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// durable declares a quorum's fresh nodes durable, so that every command,
// whatever its TTL, finds them voting at once.
func durable(url string) string {
	if strings.HasPrefix(url, "redlock://") {
		return url + "?durable=true"
	}
	return url
}

// TestHandleSteps: acquire, extend and release in separate invocations,
// on both strategies and clients, and the refusals of a handle whose
// lease ended, of an edited one and of one for other servers.
func TestHandleSteps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		srvs int
	}{{"single", 1}, {"quorum", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := durable(urlOf(redistest.StartN(t, tc.srvs)...))
			for _, client := range redistest.Clients {
				r := runBin(t, nil, "acquire", "--url", url, "--client", client, "--ttl", "1s", "--wait", "10s", "--metadata", "step=1", "--key", "steps")
				if r.code != exitOK || !strings.HasPrefix(r.stdout, "dlock1.") || strings.Count(r.stdout, "\n") != 1 {
					t.Fatalf("acquire (%s): %v; want exit 0 and one handle line", client, r)
				}
				h := strings.TrimSpace(r.stdout)
				// Nothing holds it locally: it is held on the servers.
				if r := runBin(t, nil, "inspect", "--url", url, "steps"); r.code != exitOK || !strings.Contains(r.stdout, "step=1") {
					t.Fatalf("inspect after acquire: %v; want held, with its metadata", r)
				}
				if r := runBin(t, nil, "acquire", "--url", url, "--wait", "0", "--key", "steps"); r.code != exitTaken {
					t.Fatalf("second acquire: %v; want exit %d", r, exitTaken)
				}
				// The other client extends it past its first TTL, and
				// releases it through $DLOCK_HANDLE.
				other := redistest.Clients[0]
				if client == other {
					other = redistest.Clients[1]
				}
				if r := runBin(t, nil, "extend", "--url", url, "--client", other, "--handle", h, "--ttl", "3s"); r.code != exitOK {
					t.Fatalf("extend: %v; want exit 0", r)
				}
				time.Sleep(1200 * time.Millisecond)
				if r := runBin(t, []string{"DLOCK_HANDLE=" + h}, "release", "--url", url, "--client", other); r.code != exitOK {
					t.Fatalf("release after the first TTL, extended: %v; want exit 0", r)
				}
				if r := runBin(t, nil, "inspect", "--url", url, "steps"); r.code != exitNotHeld {
					t.Fatalf("inspect after release: %v; want free", r)
				}
				// The lease ended: its handle is refused.
				for _, cmd := range []string{"extend", "release"} {
					if r := runBin(t, nil, cmd, "--url", url, "--handle", h); r.code != exitNotHeld || !strings.Contains(r.stderr, "not held") {
						t.Fatalf("%s of an ended lease: %v; want exit %d", cmd, r, exitNotHeld)
					}
				}
				// Edited, or for other servers.
				edited := h[:len(h)-1] + string(h[len(h)-1]^1)
				if r := runBin(t, nil, "release", "--url", url, "--handle", edited); r.code != exitUsage || !strings.Contains(r.stderr, "checksum") {
					t.Fatalf("release of an edited handle: %v; want exit %d", r, exitUsage)
				}
				if r := runBin(t, nil, "release", "--url", urlOf(redistest.Start(t)), "--handle", h); r.code != exitUsage || !strings.Contains(r.stderr, "another Locker") {
					t.Fatalf("release on other servers: %v; want exit %d", r, exitUsage)
				}
			}
		})
	}
}

// TestReleaseForce: a live holder (dlock run, renewing) is broken by dlock
// release --force, stops its command and exits 76; the break prints who
// held the key and a token above the holder's.
func TestReleaseForce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		srvs int
	}{{"single", 1}, {"quorum", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := durable(urlOf(redistest.StartN(t, tc.srvs)...))
			file := filepath.Join(t.TempDir(), "token")
			holder := command(nil, "run", "--url", url, "--ttl", "1s", "--wait", "10s", "--metadata", "job=nightly", "--key", "brk", "--",
				"sh", "-c", `echo "$DLOCK_TOKEN" > `+file+`.new && mv `+file+`.new `+file+`; exec sleep 30`)
			var out, errOut bytes.Buffer
			holder.Stdout, holder.Stderr = &out, &errOut
			require.NoError(t, holder.Start())
			waitFor(t, "the holder's token", func() bool { _, err := os.Stat(file); return err == nil })
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			token := strings.TrimSpace(string(b))

			r := runBin(t, nil, "release", "--force", "--url", url, "--key", "brk")
			if r.code != exitOK || !strings.Contains(r.stdout, "job=nightly") || !strings.Contains(r.stdout, "its token    "+token) {
				t.Fatalf("release --force: %v; want exit 0, the holder's metadata and token %s", r, token)
			}
			var brk string
			for line := range strings.Lines(r.stdout) {
				if v, ok := strings.CutPrefix(line, "break token"); ok {
					brk = strings.TrimSpace(v)
				}
			}
			if len(brk) != len(token) || brk <= token {
				t.Fatalf("break token %q; want above the holder's %s", brk, token)
			}
			res := wait(t, holder, &out, &errOut)
			if res.code != exitLost {
				t.Fatalf("the broken holder: %v; want exit %d", res, exitLost)
			}

			// A key nobody holds: a token all the same.
			r = runBin(t, nil, "release", "--force", "--url", url, "--key", "nobody")
			if r.code != exitOK || !strings.Contains(r.stdout, "nobody") || !strings.Contains(r.stdout, "break token") {
				t.Fatalf("release --force of a free key: %v; want exit 0, held by nobody, a break token", r)
			}
		})
	}
}

func TestHandleUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"acquire", "--help"}, exitOK},
		{[]string{"extend", "--help"}, exitOK},
		{[]string{"release", "--help"}, exitOK},
		{[]string{"acquire"}, exitUsage},
		{[]string{"extend"}, exitUsage},
		{[]string{"release"}, exitUsage},
		{[]string{"release", "--force"}, exitUsage},
		{[]string{"release", "--key", "k"}, exitUsage},
		{[]string{"release", "--force", "--key", "k", "--handle", "h"}, exitUsage},
		{[]string{"extend", "--handle", "garbage"}, exitUsage},
	} {
		r := runBin(t, nil, tc.args...)
		if r.code != tc.want {
			t.Errorf("dlock %v: %v; want exit %d", tc.args, r, tc.want)
		}
		if tc.want == exitOK && !strings.Contains(r.stdout, "Usage: dlock "+tc.args[0]) {
			t.Errorf("dlock %v: %v; want its usage on stdout", tc.args, r)
		}
	}
}
