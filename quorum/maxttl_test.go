package quorum_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestMaxTTLHeld: while the lost-data guard is on, no lock lives on any
// server longer than the max TTL, however often its lease is extended or
// renewed, since the sit-out after a data loss rests on it. The PTTL is
// read on the servers themselves, many times, while a lease renews itself
// and is extended to the max TTL by hand; an extension or an acquisition
// asking for more is refused with a *lease.ArgError naming the TTL.
func TestMaxTTLHeld(t *testing.T) {
	const ttl, maxTTL = 600 * time.Millisecond, 1200 * time.Millisecond
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(ttl), option.MaxTTL(maxTTL))
		touch(t, lk, srvs, maxTTL)
		ctx := t.Context()

		_, err := lk.TryAcquire(ctx, "k", option.TTL(maxTTL+time.Millisecond))
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != "TTL" || !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("TryAcquire with a TTL above the max TTL: %v; want a *lease.ArgError for TTL", err)
		}
		require.Empty(t, lockKeysLeft(t, srvs, "k"), "locks left by the refused acquisition")

		l, err := lk.TryAcquire(ctx, "k", option.AutoRenew(true))
		require.NoError(t, err, "TryAcquire")
		defer func() { _ = l.Release(ctx) }()

		highest := int64(0) // the longest PTTL read, ms
		sample := func() {
			t.Helper()
			for i, s := range srvs {
				out := do(t, s, "PTTL", "dlock:{k}:lock")
				p, err := strconv.ParseInt(out, 10, 64)
				require.NoError(t, err, "PTTL of server %d: %q", i, out)
				if p > maxTTL.Milliseconds() {
					t.Fatalf("server %d: PTTL %d ms; want at most the max TTL %v", i, p, maxTTL)
				}
				highest = max(highest, p)
			}
		}
		for end := time.Now().Add(3 * maxTTL); time.Now().Before(end); {
			if err := l.Extend(ctx, maxTTL); err != nil {
				t.Fatalf("Extend to the max TTL: %v", err)
			}
			sample()
			err := l.Extend(ctx, maxTTL+time.Millisecond)
			if !errors.As(err, &ae) || ae.Arg != "TTL" || !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("Extend above the max TTL: %v; want a *lease.ArgError for TTL", err)
			}
			sample()
			// The lease renews itself meanwhile, every TTL/3.
			for range 10 {
				time.Sleep(5 * time.Millisecond)
				sample()
			}
		}
		select {
		case <-l.Done():
			t.Fatalf("lease ended: %v", l.Err())
		default:
		}
		// The samples must have seen the extensions, or they show nothing.
		if highest <= ttl.Milliseconds() {
			t.Fatalf("longest PTTL read %d ms; want above the TTL %v after extending to %v", highest, ttl, maxTTL)
		}
		t.Logf("longest PTTL read: %d ms (max TTL %v)", highest, maxTTL)
	})
}
