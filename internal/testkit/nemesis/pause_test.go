package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/lease"
)

// extendLater is a backend of a lease whose one extension lands after a delay,
// as a handed lease's does when its server is slow to answer.
type extendLater struct {
	delay time.Duration
	by    time.Duration
}

func (b extendLater) Extend(ctx context.Context, _ *lease.Lease, ttl time.Duration) (time.Time, error) {
	time.Sleep(b.delay)
	return time.Now().Add(b.by), nil
}

func (extendLater) Release(context.Context, *lease.Lease) error { return nil }

// TestSleepPastHandedLease: a paused holder wakes past its lease's end as
// its holder's clock finally says it, not as the TTL read at the grant
// said: a lease handed to a waiter runs short and extends itself once in
// the background. Waking inside the extended validity, then releasing, is
// what the Valkey soak once reported as two holders at once (the checker
// still counted the first holder's lease to its extended end; the servers
// had its release).
func TestSleepPastHandedLease(t *testing.T) {
	t.Parallel()
	const past = 20 * time.Millisecond
	short := time.Now().Add(100 * time.Millisecond)
	l := engine.NewLease(extendLater{delay: 30 * time.Millisecond, by: 300 * time.Millisecond},
		leasing.Grant{Key: "k", Owner: "o", Token: 1, TTL: 300 * time.Millisecond, Until: short, Short: true})
	ttlAtGrant := l.TTL() // what the old pause slept on
	sleepPast(l, past)
	woke := time.Now()
	if l.TTL() != 0 || l.Err() == nil {
		t.Fatalf("woke at +%v with the lease still valid for %v", woke.Sub(short), l.TTL())
	}
	if !woke.After(short.Add(200 * time.Millisecond)) {
		t.Errorf("woke %v after the short end, before the extension's end; the TTL at the grant was %v", woke.Sub(short), ttlAtGrant)
	}
}
