package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
)

// overstayOdds: one lock call in overstayOdds is an overstay.
const overstayOdds = 3

// overstay holds a lease of key to its very end, by its holder's clock,
// with a waiter queued behind it: the moment a lock that grants early (a
// claim or a vote that judges the lease over before its end) lets the
// waiter in beside the holder, and the moment every lock's expiry is
// judged in. The holder takes the key if it is free (TryAcquire: it
// joins no queue; a quorum's waiter granted keeps its ticket at the
// queue's head until it releases, so that a holder that had waited would
// hold its waiter back until then, early grant or not), without
// auto-renew (when key is taken, the next free lock key in the plan's
// order), writes with its
// token at a random moment of the lease, and keeps the lease until it
// ends (lease.Lease.Done), then releases. The waiter, started as soon as
// the holder is granted, acquires the same key through the worker's
// Locker (Lockers are safe for concurrent use), so that it is queued and
// is told, by the refused attempt's hint, when the lease ends; once
// granted it writes once and releases. Both are recorded as any lock's
// holders are. A correct lock grants the waiter only after the holder's
// lease has ended by the holder's own clock, which ends before the
// server's (the drift), so an overstay is no overlap: one that is
// (ME) is a lock that grants early. It reports false, having done
// nothing, when the key was taken.
func (wl *workload) overstay(ctx context.Context, wk *worker, key string) bool {
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wk.seq++
	seq := wk.seq
	// Drawn here: the waiter's goroutine does not touch wk.
	waiterHold := between(wk.rng, 10*time.Millisecond, 60*time.Millisecond)
	writeAt := wk.rng.Float64()
	start := time.Now()
	l, err := wk.lk.TryAcquire(octx, key)
	for i := 1; i < len(wl.p.Keys) && errors.Is(err, lease.ErrTaken); i++ {
		// Taken: the next free lock key, in the plan's order, will do.
		if key = wl.p.Keys[(slices.Index(wl.p.Keys, key)+1)%len(wl.p.Keys)]; !strings.HasPrefix(key, election.KeyPrefix) {
			start = time.Now()
			l, err = wk.lk.TryAcquire(octx, key)
		}
	}
	if errors.Is(err, lease.ErrTaken) {
		return false
	}
	res := wl.res[key]
	wl.dos.Add(1)
	if err != nil {
		wl.record(key, start, nil, time.Time{}, ctx.Err() != nil)
		return true
	}
	at := time.Now()
	res.Granted(l)
	wl.overstays.Add(1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wl.queued(ctx, wk, key, seq, waiterHold)
	}()
	time.Sleep(time.Duration(writeAt * float64(l.TTL())))
	wl.writeAs(res, l, fmt.Sprintf("w%d-%d", wk.n, seq))
	<-l.Done()
	res.Released(l)
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = l.Release(rctx)
	rcancel()
	wl.record(key, start, l, at, ctx.Err() != nil)
	wg.Wait()
	return true
}

// queued is an overstay's waiter: it acquires key, holds it for hold,
// writing once, and releases it.
func (wl *workload) queued(ctx context.Context, wk *worker, key string, seq int, hold time.Duration) {
	res := wl.res[key]
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	start := time.Now()
	wl.dos.Add(1)
	l, err := wk.lk.Acquire(octx, key)
	if err != nil {
		wl.record(key, start, nil, time.Time{}, ctx.Err() != nil)
		return
	}
	at := time.Now()
	res.Granted(l)
	wl.writeAs(res, l, fmt.Sprintf("w%d-%d-q", wk.n, seq))
	hodl(res, l, at.Add(hold))
	if _, _, err := res.Read(context.Background()); err == nil {
		wl.reads.Add(1)
	}
	res.Released(l)
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = l.Release(rctx)
	rcancel()
	wl.record(key, start, l, at, ctx.Err() != nil)
}

// writeAs is write with a value of the caller's, for the goroutines that
// do not own the worker's count of writes.
func (wl *workload) writeAs(res *safety.Resource, l safety.Lease, value string) {
	wl.writes.Add(1)
	if res.Write(context.Background(), l, value) != nil {
		wl.refused.Add(1)
	}
}
