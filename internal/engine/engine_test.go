package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nopBackend is a backend of a lease that keeps every lease it is asked to.
type nopBackend struct{}

func (nopBackend) Extend(_ context.Context, _ *lease.Lease, ttl time.Duration) (time.Time, error) {
	return time.Now().Add(ttl), nil
}
func (nopBackend) Release(context.Context, *lease.Lease) error { return nil }

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		ttl, elapsed time.Duration
		factor       float64
		want         time.Duration
	}{
		{10 * time.Second, 0, 0.01, 10*time.Second - 100*time.Millisecond - settings.DriftFloor},
		{10 * time.Second, time.Second, 0.01, 9*time.Second - 100*time.Millisecond - settings.DriftFloor},
		{time.Second, time.Second, 0, -settings.DriftFloor},
		{100 * time.Millisecond, 0, 0.1, 90*time.Millisecond - settings.DriftFloor},
	} {
		got := engine.Validity(tc.ttl, tc.elapsed, settings.Drift(tc.ttl, tc.factor))
		if got != tc.want {
			t.Errorf("Validity(%v, %v, drift %v) = %v; want %v", tc.ttl, tc.elapsed, tc.factor, got, tc.want)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		arg  string // "" for no error
	}{
		{"key empty", engine.CheckKey(""), "key"},
		{"key ok", engine.CheckKey("k"), ""},
		{"ttl zero", engine.CheckTTL(0, 0.01), "ttl"},
		{"ttl all drift", engine.CheckTTL(4*time.Millisecond, 0.01), "ttl"},
		{"ttl ok", engine.CheckTTL(10*time.Millisecond, 0.01), ""},
	} {
		var ae *lease.ArgError
		switch {
		case tc.arg == "" && tc.err != nil:
			t.Errorf("%s: %v; want nil", tc.name, tc.err)
		case tc.arg != "" && (!errors.As(tc.err, &ae) || ae.Arg != tc.arg || !errors.Is(tc.err, lease.ErrInvalid)):
			t.Errorf("%s: %v; want *ArgError for %s", tc.name, tc.err, tc.arg)
		}
	}
}

func TestWait(t *testing.T) {
	slow := settings.Pace{Min: time.Minute, Max: time.Minute}
	taken := func(context.Context) (*lease.Lease, engine.Turn, error) { return nil, engine.Turn{}, lease.ErrTaken }

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := engine.Wait(ctx, slow, taken); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("Wait past deadline: %v; want DeadlineExceeded and ErrTaken", err)
	}

	why := errors.New("stop")
	cctx, ccancel := context.WithCancelCause(t.Context())
	time.AfterFunc(10*time.Millisecond, func() { ccancel(why) })
	if _, err := engine.Wait(cctx, slow, taken); !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
		t.Fatalf("Wait cancelled with a cause: %v; want Canceled and the cause", err)
	}

	// A wake signal and a hint both cut the delay short.
	wake := make(chan string, 1)
	var calls atomic.Int32
	want := engine.NewLease(nopBackend{}, leasing.Grant{Key: "k", Owner: engine.NewOwner(), Token: 7, TTL: time.Minute, Until: time.Now().Add(time.Minute)})
	defer want.Release(t.Context())
	got, err := engine.Wait(t.Context(), slow, func(context.Context) (*lease.Lease, engine.Turn, error) {
		switch calls.Add(1) {
		case 1:
			wake <- ""
			return nil, engine.Turn{Wake: wake}, lease.ErrTaken
		case 2:
			return nil, engine.Turn{Hint: time.Millisecond, Wake: wake}, lease.ErrTaken
		}
		return want, engine.Turn{}, nil
	})
	if err != nil || got != want || calls.Load() != 3 {
		t.Fatalf("Wait = %p, %v after %d calls; want the lease after 3", got, err, calls.Load())
	}

	// Heed lets the messages it declines pass, the delay running on.
	msgs := make(chan string, 3)
	calls.Store(0)
	var heard []string
	got, err = engine.Wait(t.Context(), slow, func(context.Context) (*lease.Lease, engine.Turn, error) {
		if calls.Add(1) == 1 {
			msgs <- "a 1"
			msgs <- "b 2"
			go func() { msgs <- "me 3" }()
			return nil, engine.Turn{Wake: msgs, Heed: func(m string) bool {
				heard = append(heard, m)
				return strings.HasPrefix(m, "me ")
			}}, lease.ErrTaken
		}
		return want, engine.Turn{}, nil
	})
	if err != nil || got != want || calls.Load() != 2 || len(heard) != 3 || heard[2] != "me 3" {
		t.Fatalf("Wait = %p, %v after %d calls, heard %q; want the lease after 2, on \"me 3\"", got, err, calls.Load(), heard)
	}

	// An attempt that the deadline cuts short is not the reason the wait
	// ran out: the whole attempt before it is.
	quick := settings.Pace{Min: time.Millisecond, Max: time.Millisecond}
	short := engine.Retryable(errors.New("2 of 5 nodes timed out"))
	dctx, dcancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer dcancel()
	var n atomic.Int32
	if _, err := engine.Wait(dctx, quick, func(ctx context.Context) (*lease.Lease, engine.Turn, error) {
		if n.Add(1) < 3 {
			return nil, engine.Turn{}, lease.ErrTaken
		}
		<-ctx.Done()
		return nil, engine.Turn{}, short
	}); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrTaken) || errors.Is(err, short) {
		t.Fatalf("Wait whose last attempt was cut short: %v; want DeadlineExceeded and the whole attempt's ErrTaken", err)
	}

	boom := errors.New("boom")
	if _, err := engine.Wait(t.Context(), slow, func(context.Context) (*lease.Lease, engine.Turn, error) {
		return nil, engine.Turn{}, boom
	}); err != boom {
		t.Fatalf("Wait with a failing attempt = %v; want it returned as is", err)
	}
}

// TestWaitLetsSignalsPass: a waiter with others ahead of it in the queue
// lets all but the last of their releases' signals pass without an
// attempt, and tries at the next one.
func TestWaitLetsSignalsPass(t *testing.T) {
	// Three signals already there: the releases of the two waiters ahead
	// and of this one's turn.
	wake := make(chan string, 3)
	for range 3 {
		wake <- ""
	}
	slow := settings.Pace{Min: time.Minute, Max: time.Minute}
	want := engine.NewLease(nopBackend{}, leasing.Grant{Key: "k", Owner: engine.NewOwner(), Token: 7, TTL: time.Minute, Until: time.Now().Add(time.Minute)})
	defer want.Release(t.Context())
	var calls atomic.Int32
	got, err := engine.Wait(t.Context(), slow, func(context.Context) (*lease.Lease, engine.Turn, error) {
		if calls.Add(1) == 1 {
			return nil, engine.Turn{Wake: wake, Ahead: 3}, lease.ErrTaken
		}
		return want, engine.Turn{}, nil
	})
	if err != nil || got != want {
		t.Fatalf("Wait = %v, %v; want the lease", got, err)
	}
	if calls.Load() != 2 || len(wake) != 0 {
		t.Errorf("%d attempts with %d signals left; want 2 attempts, the second at the third signal", calls.Load(), len(wake))
	}
}

func TestNewOwner(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		o := engine.NewOwner()
		if len(o) != 32 || seen[o] {
			t.Fatalf("NewOwner = %q; want 32 fresh hex digits", o)
		}
		seen[o] = true
	}
}

func TestHandleFor(t *testing.T) {
	h := lease.Handle{Strategy: "single", Servers: "a:1", Key: "k", Owner: "o", TTL: time.Second}
	if err := engine.HandleFor(h, "single", "a:1"); err != nil {
		t.Fatalf("HandleFor its own Locker: %v", err)
	}
	for _, other := range [][2]string{{"quorum", "a:1"}, {"single", "b:1"}, {"single", "a:1,b:2"}} {
		err := engine.HandleFor(h, other[0], other[1])
		if !errors.Is(err, lease.ErrForeignHandle) || !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), other[1]) {
			t.Errorf("HandleFor(%q, %q) = %v; want ErrForeignHandle and ErrInvalid, naming this Locker", other[0], other[1], err)
		}
	}
}
