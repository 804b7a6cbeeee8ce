package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/ratelimit"
)

// TestRunRate: dlock run --rate runs CMD once the limit admits it, on one
// server and on a quorum, with each client: a burst of runs, then a
// refusal (75) for a run that will not wait, and a run that waits for
// the next admission. CMD gets DLOCK_KEY and no token.
func TestRunRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
	}{{"single", 1}, {"quorum", 3}} {
		srvs := redistest.StartN(t, tc.n)
		for _, client := range redistest.Clients {
			t.Run(tc.name+"/"+client, func(t *testing.T) {
				key := "rate-" + client
				run := func(wait string, rate string) result {
					return runBin(t, nil, "run", "--url", urlOf(srvs...), "--client", client, "--rate", rate, "--burst", "2",
						"--key", key, "--wait", wait, "--", "sh", "-c", `test "$DLOCK_KEY" = `+key+` && test -z "$DLOCK_TOKEN"`)
				}
				for i := range 2 {
					if r := run("0", "2/h"); r.code != exitOK {
						t.Fatalf("run %d of a burst of 2: got %v; want exit 0", i, r)
					}
				}
				r := run("0", "2/h")
				if r.code != exitTaken || !strings.Contains(r.stderr, "not admitted") {
					t.Errorf("third run, --wait 0: got %v; want exit %d, not admitted", r, exitTaken)
				}
				// The same key at 2/h waits for ~30 min: --wait 1s gives up
				// at once, as the wait could not end in time.
				start := time.Now()
				if r := run("1s", "2/h"); r.code != exitTaken {
					t.Errorf("--wait 1s at 2/h: got %v; want exit %d", r, exitTaken)
				}
				if el := time.Since(start); el > 900*time.Millisecond {
					t.Errorf("--wait 1s on a limit 30m away took %v; want it to give up at once", el)
				}
				// A run that waits is admitted at the next slot: at 4/s the
				// key empties every 250ms.
				key += "-wait"
				for i := range 3 {
					if r := run("5s", "4/s"); r.code != exitOK {
						t.Errorf("waiting run %d at 4/s: got %v; want exit 0", i, r)
					}
				}
			})
		}
	}
}

func TestRunRateUsage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--rate", "10", "--key", "k"}, "--rate"},
		{[]string{"--rate", "x/s", "--key", "k"}, "--rate"},
		{[]string{"--rate", "10/fortnight", "--key", "k"}, "period"},
		{[]string{"--rate", "0/s", "--key", "k"}, "N 0 must be >= 1"},
		{[]string{"--rate", "10/-1s", "--key", "k"}, "PERIOD -1s must be > 0"},
		{[]string{"--rate", "10/s", "--burst", "-1", "--key", "k"}, "--burst -1 must be >= 0"},
		{[]string{"--burst", "3", "--key", "k"}, "--burst needs --rate"},
		// Limits whose interval or refill overflowed and passed, then
		// failed on the servers (69).
		{[]string{"--rate", "1/2562047h", "--burst", "1", "--key", "k"}, "PERIOD 2562047h0m0s must make the interval"},
		{[]string{"--rate", "1000000000000000/2562047h", "--key", "k"}, "PERIOD 2562047h0m0s must be at most"},
		{[]string{"--rate", "1/d", "--burst", "367", "--key", "k"}, "--burst 367 must refill"},
		{[]string{"--rate", "10/s", "--permits", "2", "--key", "k"}, "--rate excludes"},
		{[]string{"--rate", "10/s", "--keys", "a,b"}, "--rate excludes"},
		{[]string{"--rate", "10/s", "--shared", "--key", "k"}, "--rate excludes"},
	} {
		args := append(append([]string{"run", "--url", urlOf(srv)}, tc.args...), "--", "true")
		if r := runBin(t, nil, args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("dlock %v: got %v; want exit %d saying %q", tc.args, r, exitUsage, tc.says)
		}
	}
	if r := runBin(t, nil, "run", "--help"); r.code != exitOK || !strings.Contains(r.stdout+r.stderr, "--rate N/PERIOD") {
		t.Errorf("run --help: got %v; want exit 0 describing --rate", r)
	}
	keys, err := srv.Keys()
	if err != nil || len(keys) != 0 {
		t.Errorf("refused runs left keys %v (%v)", keys, err)
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		burst int
		want  ratelimit.Limit
	}{
		{"10/s", 0, ratelimit.Limit{Rate: 10, Per: time.Second}},
		{"100/m", 5, ratelimit.Limit{Rate: 100, Per: time.Minute, Burst: 5}},
		{"5/1h", 0, ratelimit.Limit{Rate: 5, Per: time.Hour}},
		{"3/500ms", 1, ratelimit.Limit{Rate: 3, Per: 500 * time.Millisecond, Burst: 1}},
		{"1/d", 0, ratelimit.Limit{Rate: 1, Per: 24 * time.Hour}},
	} {
		got, err := parseRate(tc.in, tc.burst)
		if err != nil || got != tc.want {
			t.Errorf("parseRate(%q, %d) = %+v, %v; want %+v", tc.in, tc.burst, got, err, tc.want)
		}
	}
}

// TestRunRateUnavailable: with two of three servers stopped, the rate
// limit has no majority: dlock run --rate exits 69 (unavailable), with or
// without --wait, not 75 (not admitted): the nodes' timeouts are not the
// end of --wait.
func TestRunRateUnavailable(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	for _, s := range srvs[1:] {
		resume := s.PauseOnce()
		t.Cleanup(resume) // before the servers' own cleanup
		defer resume()
	}
	for _, client := range redistest.Clients {
		for _, wait := range []string{"0", "2s"} {
			r := runBin(t, nil, "run", "--url", urlOf(srvs...), "--client", client, "--rate", "10/s",
				"--key", "unavailable", "--wait", wait, "--", "true")
			if r.code != exitUnavailable || !strings.Contains(r.stderr, "too few nodes answered") {
				t.Errorf("%s, --wait %s, 2 of 3 servers stopped: got %v; want exit %d, too few nodes answered", client, wait, r, exitUnavailable)
			}
		}
	}
}
