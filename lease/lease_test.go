package lease_test

// These are unit tests of the Lease's state and arithmetic, on a fake
// Backend whose answers the test chooses. The same behaviours run against
// real servers in package single's tests.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a Backend that extends by ttl while refuse is false, and checks
// that the Lease never calls it concurrently.
type fake struct {
	refuse   atomic.Bool
	fail     atomic.Int32 // the next fail Extend calls fail with a non-refusal
	extends  atomic.Int32
	releases atomic.Int32
	relFail  atomic.Int32 // the next relFail Release calls fail
	inCall   atomic.Bool
	overlap  atomic.Bool
	relCtx   chan relCall
}

// relCall is what Release saw of its context.
type relCall struct {
	err      error
	deadline time.Time
	ok       bool
}

func (f *fake) enter() func() {
	if !f.inCall.CompareAndSwap(false, true) {
		f.overlap.Store(true)
	}
	return func() { f.inCall.Store(false) }
}

func (f *fake) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	defer f.enter()()
	f.extends.Add(1)
	if f.fail.Load() > 0 {
		f.fail.Add(-1)
		return time.Time{}, errors.New("fake: timeout")
	}
	if f.refuse.Load() {
		return time.Time{}, lease.ErrNotHeld
	}
	return time.Now().Add(ttl), nil
}

func (f *fake) Release(ctx context.Context, l *lease.Lease) error {
	defer f.enter()()
	f.releases.Add(1)
	if f.relCtx != nil {
		dl, ok := ctx.Deadline()
		f.relCtx <- relCall{ctx.Err(), dl, ok}
	}
	if f.relFail.Load() > 0 {
		f.relFail.Add(-1)
		return errors.New("fake: timeout")
	}
	if f.refuse.Load() {
		return lease.ErrNotHeld
	}
	return nil
}

// renewing is g with auto-renew on.
func renewing(g leasing.Grant) leasing.Grant {
	g.AutoRenew = true
	return g
}

func grant(ttl time.Duration) leasing.Grant {
	return leasing.Grant{Key: "k", Owner: engine.NewOwner(), Token: 7, TTL: ttl, Until: time.Now().Add(ttl)}
}

func TestReleaseEnds(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, grant(time.Minute))
	ctx := l.Context(t.Context())
	if l.Err() != nil || l.TTL() <= 0 || l.Key() != "k" || l.Token() != 7 || !l.Fenced() {
		t.Fatalf("fresh lease: Err %v TTL %v Key %q Token %d", l.Err(), l.TTL(), l.Key(), l.Token())
	}
	select {
	case <-l.Done():
		t.Fatal("Done closed before Release")
	default:
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	<-ctx.Done()
	if !errors.Is(l.Err(), lease.ErrReleased) || !errors.Is(context.Cause(ctx), lease.ErrReleased) {
		t.Fatalf("Err %v, cause %v; want ErrReleased", l.Err(), context.Cause(ctx))
	}
	if l.TTL() != 0 {
		t.Fatalf("TTL after Release = %v; want 0", l.TTL())
	}
	late := l.Context(t.Context())
	if !errors.Is(context.Cause(late), lease.ErrReleased) {
		t.Fatalf("Context after the end: cause %v; want ErrReleased", context.Cause(late))
	}
	if err := l.Extend(t.Context(), time.Minute); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrReleased) {
		t.Fatalf("Extend after Release: %v; want ErrNotHeld and ErrReleased", err)
	}
}

// TestReleaseTwice: a second Release after one that succeeded is told the
// lock is not held without asking the servers (which may still be
// finishing the first); after one that failed, it asks them again.
func TestReleaseTwice(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, grant(time.Minute))
	require.NoError(t, l.Release(t.Context()), "Release")
	if err := l.Release(t.Context()); !errors.Is(err, lease.ErrNotHeld) || f.releases.Load() != 1 {
		t.Fatalf("second Release: %v after %d backend calls; want ErrNotHeld after 1", err, f.releases.Load())
	}

	f = &fake{}
	f.relFail.Store(1)
	l = engine.NewLease(f, grant(time.Minute))
	if err := l.Release(t.Context()); err == nil || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("failing Release: %v; want the backend's error", err)
	}
	if err := l.Release(t.Context()); err != nil || f.releases.Load() != 2 {
		t.Fatalf("Release after a failed one: %v after %d backend calls; want nil after 2", err, f.releases.Load())
	}
}

func TestExpiresByLocalValidity(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, grant(30*time.Millisecond))
	ctx := l.Context(t.Context())
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease did not expire")
	}
	if !errors.Is(l.Err(), lease.ErrExpired) || !errors.Is(context.Cause(ctx), lease.ErrExpired) {
		t.Fatalf("Err %v, cause %v; want ErrExpired", l.Err(), context.Cause(ctx))
	}
	if f.extends.Load() != 0 {
		t.Fatalf("extends = %d; want 0", f.extends.Load())
	}

	g := grant(time.Minute)
	g.Until = time.Now().Add(-time.Second)
	born := engine.NewLease(f, g)
	<-born.Done()
	if !errors.Is(born.Err(), lease.ErrExpired) {
		t.Fatalf("born expired: Err %v; want ErrExpired", born.Err())
	}
}

func TestExtendMovesValidity(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, grant(40*time.Millisecond))
	defer l.Release(t.Context())
	if err := l.Extend(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond)
	if l.Err() != nil || l.TTL() < 50*time.Second {
		t.Fatalf("after Extend: Err %v TTL %v; want alive with ~1m", l.Err(), l.TTL())
	}
	if err := l.Extend(t.Context(), 0); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Extend(0) = %v; want ErrInvalid", err)
	}
	f.refuse.Store(true)
	if err := l.Extend(t.Context(), time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("refused Extend = %v; want ErrNotHeld", err)
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("after a refused Extend: Err %v; want ErrLost", l.Err())
	}
}

func TestParentCancelled(t *testing.T) {
	l := engine.NewLease(&fake{}, grant(time.Minute))
	defer l.Release(t.Context())
	parent, cancel := context.WithCancelCause(t.Context())
	why := errors.New("shutting down")
	ctx := l.Context(parent)
	cancel(why)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), why) || l.Err() != nil {
		t.Fatalf("cause %v, lease Err %v; want the parent's cause, lease alive", context.Cause(ctx), l.Err())
	}
}

func TestAutoRenewLost(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, renewing(grant(30*time.Millisecond)))
	ctx := l.Context(t.Context())
	time.Sleep(100 * time.Millisecond)
	if l.Err() != nil {
		t.Fatalf("auto-renewed lease ended: %v", l.Err())
	}
	if f.extends.Load() < 2 {
		t.Fatalf("extends = %d after 100ms at TTL 30ms; want >= 2", f.extends.Load())
	}
	f.refuse.Store(true)
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease did not end after renewal was refused")
	}
	if !errors.Is(l.Err(), lease.ErrLost) || !errors.Is(context.Cause(ctx), lease.ErrLost) {
		t.Fatalf("Err %v, cause %v; want ErrLost", l.Err(), context.Cause(ctx))
	}
	if err := l.Release(t.Context()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of a lost lease: %v; want ErrNotHeld", err)
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("Err after Release = %v; want ErrLost kept", l.Err())
	}
	if f.overlap.Load() {
		t.Fatal("Backend called concurrently")
	}
}

func TestAutoRenewSurvivesFailure(t *testing.T) {
	f := &fake{}
	f.fail.Store(1)
	l := engine.NewLease(f, renewing(grant(60*time.Millisecond)))
	time.Sleep(150 * time.Millisecond)
	if l.Err() != nil {
		t.Fatalf("one failed renewal ended the lease: %v", l.Err())
	}
	require.NoError(t, l.Release(t.Context()))
}

func TestAutoRenewStopsWhenFailuresLast(t *testing.T) {
	f := &fake{}
	f.fail.Store(1 << 30)
	l := engine.NewLease(f, renewing(grant(30*time.Millisecond)))
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease did not end while every renewal failed")
	}
	if !errors.Is(l.Err(), lease.ErrExpired) {
		t.Fatalf("Err %v; want ErrExpired", l.Err())
	}
	_ = l.Release(t.Context())
}

func TestReleaseStopsRenewal(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, renewing(grant(9*time.Millisecond)))
	time.Sleep(20 * time.Millisecond)
	// Release races the renewal goroutine; it must stop it and wait for it.
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := f.extends.Load()
	time.Sleep(30 * time.Millisecond)
	if got := f.extends.Load(); got != n {
		t.Fatalf("extends went from %d to %d after Release", n, got)
	}
	if f.overlap.Load() {
		t.Fatal("Backend called concurrently")
	}
	// goleak in TestMain checks the goroutine is gone.
}

func TestReleaseOnEndedContext(t *testing.T) {
	f := &fake{relCtx: make(chan relCall, 1)}
	l := engine.NewLease(f, grant(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-f.relCtx
	if got.err != nil || !got.ok || time.Until(got.deadline) > lease.ReleaseTimeout {
		t.Fatalf("release ctx: err %v, deadline %v (set %v); want live and bounded by ReleaseTimeout", got.err, got.deadline, got.ok)
	}
}

func TestConcurrentUse(t *testing.T) {
	f := &fake{}
	l := engine.NewLease(f, renewing(grant(20*time.Millisecond)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				_ = l.Extend(t.Context(), 50*time.Millisecond)
				_ = l.TTL()
				_ = l.Context(t.Context())
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Release(t.Context()))
	if f.overlap.Load() {
		t.Fatal("Backend called concurrently")
	}
}
