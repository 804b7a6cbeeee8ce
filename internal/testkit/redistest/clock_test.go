package redistest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serverTime reads TIME from s.
func serverTime(t *testing.T, s *Server) time.Time {
	t.Helper()
	out, err := s.Do("TIME")
	require.NoError(t, err, "TIME")
	var sec, usec int64
	_, err = fmt.Sscan(out, &sec, &usec)
	require.NoError(t, err, "TIME reply %q", out)
	return time.Unix(sec, usec*1000)
}

func do(t *testing.T, s *Server, args ...string) string {
	t.Helper()
	out, err := s.Do(args...)
	require.NoError(t, err, "%v", args)
	return out
}

func TestClockJumpExpiresKey(t *testing.T) {
	s, clock := StartClocked(t)
	pid := s.Pid()
	before := serverTime(t, s)
	if d := time.Until(before); d.Abs() > time.Second {
		t.Fatalf("server clock off by %v before any jump", d)
	}
	do(t, s, "SET", "k", "v", "PX", "5000")
	if got := do(t, s, "EXISTS", "k"); got != "1" {
		t.Fatalf("EXISTS k before jump = %s; want 1", got)
	}

	clock.Jump(10 * time.Second)
	if got := do(t, s, "EXISTS", "k"); got != "0" {
		t.Fatalf("EXISTS k after +10s jump = %s; want 0", got)
	}
	if d := serverTime(t, s).Sub(before); d < 10*time.Second || d > 12*time.Second {
		t.Fatalf("TIME moved by %v across a +10s jump; want 10s..12s", d)
	}
	if got := clock.Offset(); got != 10*time.Second {
		t.Fatalf("Offset() = %v; want 10s", got)
	}
	if got := do(t, s, "PING"); got != "PONG" || s.Pid() != pid {
		t.Fatalf("after jump: PING = %q, pid %d (was %d); want PONG, same pid", got, s.Pid(), pid)
	}
}

func TestClockJumpBackStretchesTTL(t *testing.T) {
	s, clock := StartClocked(t)
	clock.Jump(-60 * time.Second)
	do(t, s, "SET", "k", "v", "PX", "5000")
	clock.Jump(60 * time.Second) // back to real time: the key was stamped 60 s early
	if got := do(t, s, "EXISTS", "k"); got != "0" {
		t.Fatalf("EXISTS k = %s; want 0 (stamped at -60s, lived 5s)", got)
	}

	clock.Jump(-60 * time.Second)
	do(t, s, "SET", "k", "v", "PX", "5000")
	clock.Jump(-60 * time.Second)
	pttl, err := strconv.Atoi(do(t, s, "PTTL", "k"))
	if err != nil || pttl < 60_000 || pttl > 65_000 {
		t.Fatalf("PTTL after a -60s jump = %d (%v); want 60000..65000", pttl, err)
	}
}

func TestClockRate(t *testing.T) {
	s, clock := StartClocked(t)
	clock.SetRate(20)
	real0, srv0 := time.Now(), serverTime(t, s)
	time.Sleep(300 * time.Millisecond)
	srv1, real1 := serverTime(t, s), time.Now()
	realD, srvD := real1.Sub(real0), srv1.Sub(srv0)
	if ratio := float64(srvD) / float64(realD); ratio < 15 || ratio > 25 {
		t.Fatalf("server clock advanced %v in %v real (x%.1f); want about x20", srvD, realD, ratio)
	}

	// Back to the real rate: the clock keeps what it gained and goes on at x1.
	clock.SetRate(1)
	gained := clock.Offset()
	if gained < 5*time.Second {
		t.Fatalf("Offset() after 300ms at x20 = %v; want >= 5s", gained)
	}
	srv2 := serverTime(t, s)
	time.Sleep(200 * time.Millisecond)
	srv3 := serverTime(t, s)
	if d := srv3.Sub(srv2); d < 150*time.Millisecond || d > 400*time.Millisecond {
		t.Fatalf("server clock advanced %v in 200ms real at x1", d)
	}
	if d := time.Until(srv3) - gained; d.Abs() > 100*time.Millisecond {
		t.Fatalf("server clock minus real clock = %v; want Offset() %v", time.Until(srv3), gained)
	}
}

// Several servers may share one Clock and the shim is shared by parallel
// tests.
func TestClockShared(t *testing.T) {
	for i := range 2 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			opt, clock := WithClock(t)
			a, b := Start(t, opt), Start(t, opt)
			clock.Jump(time.Hour)
			for _, s := range []*Server{a, b} {
				if d := time.Until(serverTime(t, s)); d < 59*time.Minute || d > 61*time.Minute {
					t.Errorf("%s: clock ahead by %v; want 1h", s.Addr(), d)
				}
			}
		})
	}
}

func TestClockReset(t *testing.T) {
	_, c := WithClock(t)
	c.Jump(5 * time.Second)
	c.SetRate(2)
	c.Reset()
	if off := c.Offset(); off != 0 {
		t.Fatalf("Offset() after Reset = %v; want 0", off)
	}
}
