package nemesis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/internal/safety"
	"github.com/dlockgo/dlock/lease"
)

// rwWriters is the share of the read-write lock's takers that write: one
// in rwWriters; the others read.
const rwWriters = 3

// rwKey names the writers' resource of the read-write lock name, and its
// findings; rwReadersKey the readers' record (holds and acquisitions).
func rwKey(name string) string        { return "rwlock:" + name }
func rwReadersKey(name string) string { return "rwlock:" + name + " (readers)" }

// rwlock takes a side of the plan's read-write lock (package rwlock) on
// the worker's server, renewed in the background: a writer one time in
// rwWriters, held as a lock is held (writes through the fence of the
// lock's register with its token, a read); otherwise a reader, which reads
// the register once or twice while it holds, and takes the read as the
// fence would admit it: under a token no older than the register's. The
// writers are checked as a lock key is (ORDER among writers, FENCE on the
// register); the readers against the writers: no interval of a writer
// overlaps another holder's (ME, safety.CheckShared), and a reader's token
// is no older than any token granted before it began, a writer's above
// every reader's granted before it began (ORDER, safety.CheckSharedOrder).
func (wl *workload) rwlock(ctx context.Context, wk *worker) {
	u := wl.drawUse(wk)
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	name := wl.p.RWLock
	writer := wk.rng.IntN(rwWriters) == 0
	start := time.Now()
	var (
		l   *lease.Lease
		err error
	)
	if writer {
		l, err = wk.rw.Acquire(octx, name, lease.WithAutoRenew())
	} else {
		l, err = wk.rw.AcquireShared(octx, name, lease.WithAutoRenew())
	}
	key := rwKey(name)
	if !writer {
		key = rwReadersKey(name)
	}
	if err != nil {
		wl.record(key, start, nil, time.Time{}, ctx.Err() != nil)
		return
	}
	granted := time.Now()
	if writer {
		wl.rwWriterGrants.Add(1)
		wl.rwRes.Granted(l)
		wl.use(wl.rwRes, l, wk, u)
	} else {
		wl.rwReaderGrants.Add(1)
		wl.rwReaders.Granted(l)
		begin := time.Now()
		for _, d := range u.at {
			hodl(wl.rwReaders, l, begin.Add(d))
			wl.rwRead(l)
		}
		hodl(wl.rwReaders, l, begin.Add(u.hold))
		wl.rwReaders.Released(l)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = l.Release(rctx)
	rcancel()
	wl.record(key, start, l, granted, ctx.Err() != nil)
}

// rwRead reads the read-write lock's register for the reader holding l:
// the read itself is checked with the writers' (the register
// linearizable); a fence that keeps the highest token it has seen would
// refuse the reader's act on it when l's token is older than the
// register's. Such a read by a reader whose lease is still valid by its
// own clock is counted, not made a violation by itself: it can only
// follow an overlap with a writer or a reader's token out of order, which
// ME and ORDER find, date and judge. A reader whose lease ran out (its
// renewal refused under a fault) is refused rightly, and not counted.
func (wl *workload) rwRead(l *lease.Lease) {
	_, t, err := wl.rwRes.Read(context.Background())
	if err != nil {
		return
	}
	wl.reads.Add(1)
	if l.Token() < t && l.TTL() > 0 {
		wl.rwReadsBehind.Add(1)
	}
}

// rwViolations checks the read-write lock's histories: the writers'
// register as a lock key's (FENCE), writers against each other and
// against readers (ME, with safety.CheckShared, which covers the
// overlaps of writers that the register's own check would count again),
// the writers' tokens (ORDER), all judged by ws; and the readers' tokens
// (ORDER, safety.CheckSharedOrder), judged by ws and readerWindows.
func (wl *workload) rwViolations(events []*Event, ws []safety.Window) (vs, readerVs []safety.Violation, readerWs []safety.Window) {
	name := wl.p.RWLock
	for _, v := range wl.rwRes.Check().Violations {
		if v.Property != safety.MutualExclusion {
			vs = append(vs, v)
		}
	}
	holds := append(wl.rwRes.History().Holds(false), wl.rwReaders.History().Holds(true)...)
	vs = append(vs, safety.CheckShared(holds)...)
	wl.mu.Lock()
	writers, readers := wl.acqs[rwKey(name)], wl.acqs[rwReadersKey(name)]
	wl.mu.Unlock()
	vs = append(vs, safety.CheckOrder(writers)...)
	readerWs = slices.Concat(ws, readerWindows(events, writers))
	return vs, safety.CheckSharedOrder(writers, readers), readerWs
}

// readerWindows are the stretches in which the readers' tokens are not
// promised to keep their order: from a loss of the latest grants (a
// master's restart, a failover) until the first writer granted after it.
// Readers granted on the server that lost them carry the counter it kept,
// the last writer it knows, which may be older than a lost writer's token
// (docs/rwlock.md, failure cases): a fence then refuses their acts, the
// safe side. That first writer's own token is promised above them all: a
// window ends just before its grant.
func readerWindows(events []*Event, writers []safety.Acquisition) []safety.Window {
	var ws []safety.Window
	for _, e := range events {
		if e.Skipped != "" || e.Start.IsZero() || !e.LostData() {
			continue
		}
		var next time.Time // the first writer granted after the loss, or none
		for _, a := range writers {
			if !a.Granted.IsZero() && a.Granted.After(e.End) && (next.IsZero() || a.Granted.Before(next)) {
				next = a.Granted
			}
		}
		to := next.Add(-time.Nanosecond)
		if next.IsZero() {
			to = time.Now()
		}
		ws = append(ws, safety.Window{Property: safety.Order, From: e.Start, To: to,
			Why: fmt.Sprintf("%s: readers carry the kept counter until the next writer", e.Fault.String())})
	}
	return ws
}
