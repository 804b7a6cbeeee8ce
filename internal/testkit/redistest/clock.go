package redistest

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

//go:embed clockshim/clockshim.c
var clockShimSrc []byte

// Clock is the wall clock of the redis-server processes started with its
// Option: the real wall clock plus an offset that a test moves with Jump,
// optionally running at a different rate (SetRate). Only CLOCK_REALTIME,
// gettimeofday and time are shifted; the monotonic clock stays real, as on a
// host whose NTP daemon steps or slews the time. Redis 7.0 expires keys by
// the wall clock, so a Jump forward expires keys at once.
//
// The offset has millisecond resolution. A change is seen by the servers on
// their next clock read. Methods are safe for concurrent use and report
// failures with t.Errorf, so they may be called from any goroutine.
type Clock struct {
	t    testing.TB
	path string

	mu       sync.Mutex
	offsetMs int64 // offset at anchor
	ppm      int64 // rate in parts per million of real time
	anchor   int64 // real Unix time in ns from which the rate applies
}

// WithClock returns an Option that runs redis-server under the clock shim,
// and the Clock that moves it. One Clock may drive several servers (they
// then share one faked clock). The shim is built with gcc from embedded C
// source on first use and shared by every test of the process that uses it
// at the same time.
func WithClock(t testing.TB) (Option, *Clock) {
	t.Helper()
	so := clockShim(t)
	c := &Clock{t: t, path: filepath.Join(t.TempDir(), "clock"), ppm: 1e6}
	c.mu.Lock()
	err := c.writeLocked()
	c.mu.Unlock()
	if err != nil {
		t.Fatalf("redistest: clock file: %v", err)
	}
	return WithEnv("LD_PRELOAD="+so, "DLOCK_CLOCK_FILE="+c.path), c
}

// StartClocked starts a Server whose wall clock the returned Clock moves.
func StartClocked(t testing.TB, opts ...Option) (*Server, *Clock) {
	t.Helper()
	o, c := WithClock(t)
	return Start(t, append(opts, o)...), c
}

// Jump moves the clock by d (forward when positive), as a step of the
// system time would; a running rate goes on from the new time.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsetMs += d.Milliseconds()
	if err := c.writeLocked(); err != nil {
		c.t.Errorf("redistest: clock jump %v: %v", d, err)
	}
}

// SetRate makes the clock advance r seconds per real second from now on,
// continuing from its current time (rounded up to the millisecond); 1 is
// the real rate. r must be positive.
func (c *Clock) SetRate(r float64) {
	if !(r > 0) || math.IsInf(r, 0) {
		c.t.Errorf("redistest: clock rate %v: must be positive and finite", r)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	c.offsetMs = int64(math.Ceil(float64(c.shiftLocked(now)) / 1e6))
	c.ppm = int64(math.Round(r * 1e6))
	c.anchor = now
	if err := c.writeLocked(); err != nil {
		c.t.Errorf("redistest: clock rate %v: %v", r, err)
	}
}

// Reset puts the clock back on the real wall clock: no offset, the real
// rate.
func (c *Clock) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsetMs, c.ppm, c.anchor = 0, 1e6, 0
	if err := c.writeLocked(); err != nil {
		c.t.Errorf("redistest: clock reset: %v", err)
	}
}

// Offset returns how far the clock is ahead of the real wall clock now
// (negative when behind).
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.shiftLocked(time.Now().UnixNano()))
}

// shiftLocked is the shim's arithmetic, in ns at real time now.
func (c *Clock) shiftLocked(now int64) int64 {
	off := c.offsetMs * 1e6
	if c.ppm == 1e6 {
		return off
	}
	return off + int64(float64(now-c.anchor)*float64(c.ppm-1e6)/1e6)
}

// writeLocked replaces the file in one rename, so the shim never reads a
// half-written one.
func (c *Clock) writeLocked() error {
	tmp := c.path + ".tmp"
	line := fmt.Sprintf("%d %d %d\n", c.offsetMs, c.ppm, c.anchor)
	if err := os.WriteFile(tmp, []byte(line), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path)
}

// The shim is built once and kept while any test uses it, then removed with
// its directory, so no build product outlives the tests.
var shim struct {
	mu    sync.Mutex
	users int
	so    string
}

func clockShim(t testing.TB) string {
	t.Helper()
	shim.mu.Lock()
	defer shim.mu.Unlock()
	if shim.users == 0 {
		so, err := buildShim()
		if err != nil {
			t.Fatalf("redistest: build clock shim: %v", err)
		}
		shim.so = so
	}
	shim.users++
	t.Cleanup(func() {
		shim.mu.Lock()
		defer shim.mu.Unlock()
		if shim.users--; shim.users == 0 {
			_ = os.RemoveAll(filepath.Dir(shim.so))
			shim.so = ""
		}
	})
	return shim.so
}

func buildShim() (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("gcc is needed to build the LD_PRELOAD clock shim: %w", err)
	}
	dir, err := os.MkdirTemp("", "dlock-clockshim-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "clockshim.c")
	so := filepath.Join(dir, "clockshim.so")
	if err := os.WriteFile(src, clockShimSrc, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", so, src)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%w: %s", err, out.Bytes())
	}
	return so, nil
}
