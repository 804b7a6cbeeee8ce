package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// durable declares a quorum's fresh nodes durable, so that every command,
// whatever its TTL, finds them voting at once.
func durable(url string) string {
	if strings.HasPrefix(url, "quorum://") {
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
				other := redistest.OtherClient(client)
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
			if brk := field(r.stdout, "break token"); !above(brk, token) {
				t.Fatalf("break token %q; want above the holder's %s", brk, token)
			}
			res := wait(t, holder, &out, &errOut)
			if res.code != exitLost {
				t.Fatalf("the broken holder: %v; want exit %d", res, exitLost)
			}

			// A key nobody holds: "was held by  nobody", its last token
			// (the first break's), and a break token above it.
			r = runBin(t, nil, "release", "--force", "--url", url, "--key", "free-key")
			if r.code != exitOK || !regexp.MustCompile(`(?m)^was held by +nobody$`).MatchString(r.stdout) ||
				strings.Contains(r.stdout, "its token") || field(r.stdout, "break token") == "" {
				t.Fatalf("release --force of a free key: %v; want exit 0, was held by nobody, a break token", r)
			}
			last := field(r.stdout, "break token")
			r = runBin(t, nil, "release", "--force", "--url", url, "--key", "free-key")
			if r.code != exitOK || !regexp.MustCompile(`(?m)^was held by +nobody$`).MatchString(r.stdout) ||
				field(r.stdout, "last token") != last || !above(field(r.stdout, "break token"), last) {
				t.Fatalf("second release --force of a free key: %v; want held by nobody, last token %s, a break token above it", r, last)
			}
		})
	}
}

// field returns the value of the line of out that starts with name, as
// the command prints a table of names and values; "" when none does.
func field(out, name string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// above reports whether a and b are tokens, a above b.
func above(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
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

// TestHandleUnreachable: with the single server stopped, or 2 of 3 quorum
// nodes (SIGSTOP), extend, release --handle, release --force, acquire,
// inspect, run and elect exit 69: servers that do not answer never make a
// lease ended (exit 1) or a lock taken (exit 75). Once the servers
// continue, the lease is still held on every node, and its handle
// extends and releases it.
func TestHandleUnreachable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		srvs int
		stop []int
	}{{"single", 1, []int{0}}, {"quorum", 3, []int{1, 2}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srvs := redistest.StartN(t, tc.srvs)
			url := durable(urlOf(srvs...))
			// The TTL is an hour so that only the stopped servers could end
			// the lease: the servers expire keys by the wall clock, which
			// jumps when the host's machine is paused and resumed.
			start := time.Now()
			r := runBin(t, nil, "acquire", "--url", url, "--ttl", "1h", "--key", "away")
			if r.code != exitOK {
				t.Fatalf("acquire: %v", r)
			}
			h := strings.TrimSpace(r.stdout)

			var resume []func()
			for _, i := range tc.stop {
				resume = append(resume, srvs[i].PauseOnce())
				defer resume[len(resume)-1]()
			}
			for _, args := range [][]string{
				{"extend", "--handle", h, "--timeout", "3s"},
				{"release", "--handle", h, "--timeout", "3s"},
				// A break lands where it can, even when it fails: it is
				// tried on another key.
				{"release", "--force", "--key", "other", "--timeout", "3s"},
				{"acquire", "--wait", "1s", "--key", "other"},
				{"inspect", "--timeout", "3s", "away"},
				{"run", "--wait", "1s", "--key", "other", "--", "true"},
				{"elect", "--wait", "1s", "--name", "other", "--", "true"},
			} {
				args = append(args[:1:1], append([]string{"--url", url}, args[1:]...)...)
				if r := runBin(t, nil, args...); r.code != exitUnavailable {
					t.Errorf("dlock %s with %d of %d servers stopped: %v; want exit %d", args[0], len(tc.stop), tc.srvs, r, exitUnavailable)
				}
			}
			for _, f := range resume {
				f()
			}

			for i, s := range srvs {
				if v, err := s.Do("EXISTS", lockKey(tc.name, "away")); err != nil || v != "1" {
					t.Errorf("server %d once the servers continue: lock EXISTS = %q (%v); want still held (%v since the acquire, %v by the wall clock)",
						i, v, err, time.Since(start), time.Now().Round(0).Sub(start.Round(0)))
				}
			}
			if r := runBin(t, nil, "extend", "--url", url, "--handle", h); r.code != exitOK {
				t.Fatalf("extend once the servers continue: %v; want exit 0", r)
			}
			if r := runBin(t, nil, "release", "--url", url, "--handle", h); r.code != exitOK {
				t.Fatalf("release once the servers continue: %v; want exit 0", r)
			}
		})
	}
}

// lockKey is the server key that holds the lock on key, for the single
// strategy or the quorum's.
func lockKey(strategy, key string) string {
	if strategy == "quorum" {
		return "dlock:{" + key + "}:lock"
	}
	return "dlock:{" + key + "}"
}
