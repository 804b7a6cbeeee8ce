package nemesis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

// rwWriters is the share of the read-write lock's takers that write: one
// in rwWriters; the others read. One writer in rwPaused is paused past
// its lease (rwPausedWriter); under UnraisedReaders, every writer.
const (
	rwWriters = 3
	rwPaused  = 4
)

// UnraisedReaders is a Bias for the single strategy: the random mix of
// faults (NewPlan plans it as NoBias), with the read-write lock's readers
// under the rule before the first reader after a writer raised the
// counter (plant.UnraisedReaders: readers take the token of the writer
// before them) on every worker, three calls in four taking it, and every
// writer of it paused past its lease (see rwPausedWriter).
// The paused writers' late writes then pass a fence the readers after
// them have shown their token to, and the nemesis must find them (FENCE).
const UnraisedReaders Bias = "unraised-readers"

// newRWLock builds a worker's read-write lock on the single strategy's
// server n; under UnraisedReaders, on a node that runs its claim with the
// raise switched off.
func newRWLock(p *Plan, n node.Node) (*rwlock.Locker, error) {
	if p.Bias == UnraisedReaders {
		unraised, err := plant.UnraisedReaders()
		if err != nil {
			return nil, err
		}
		n = plant.Swapping(n, unraised)
	}
	return rwlock.New(n, option.TTL(p.TTL))
}

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
// One writer in rwPaused is paused past its lease instead
// (rwPausedWriter).
func (wl *workload) rwlock(ctx context.Context, wk *worker) {
	paused := rwPaused
	if wl.p.Bias == UnraisedReaders {
		paused = 1
	}
	writer := wk.rng.IntN(rwWriters) == 0
	if writer && wk.rng.IntN(paused) == 0 {
		wl.rwPausedWriter(ctx, wk)
		return
	}
	wl.rwTake(ctx, wk, writer, wl.drawUse(wk))
}

// rwTake takes a side of the read-write lock and uses it as u says (see
// rwlock). A reader uses nothing of wk but its Locker, so another
// goroutine may take one beside the worker's own.
func (wl *workload) rwTake(ctx context.Context, wk *worker, writer bool, u use) {
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	name := wl.p.RWLock
	start := time.Now()
	var (
		l   *lease.Lease
		err error
	)
	if writer {
		l, err = wk.rw.Acquire(octx, name, option.AutoRenew(true))
	} else {
		l, err = wk.rw.AcquireShared(octx, name, option.AutoRenew(true))
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
			wl.rwRead(l, granted)
		}
		hodl(wl.rwReaders, l, begin.Add(u.hold))
		wl.rwReaders.Released(l)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = l.Release(rctx)
	rcancel()
	wl.record(key, start, l, granted, ctx.Err() != nil)
}

// rwPausedWriter is a writer of the read-write lock paused past its
// lease, as holderPause is a lock's holder: it takes the write lock
// without renewal, sleeps a quarter to three quarters of a TTL past the
// lease's end (readers come in meanwhile), and writes the register once
// with its token. The register admits that late write (the readers only
// read it); rwLateWrites judges whether a fence the readers after it had
// shown their token to would have. Under UnraisedReaders, where the
// schedule must bring a reader in before the late write, the worker also
// takes a reader of its own, as another holder, as soon as the writer is
// granted: it queues behind the writer, ahead of any writer that comes
// later, and enters when the writer's lease ends; the late write then
// comes a TTL later still.
func (wl *workload) rwPausedWriter(ctx context.Context, wk *worker) {
	name := wl.p.RWLock
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	start := time.Now()
	l, err := wk.rw.Acquire(octx, name)
	var at time.Time
	if err == nil {
		at = time.Now()
		wl.rwWriterGrants.Add(1)
		wl.rwRes.Granted(l)
		wl.pauses.Add(1)
		past := wl.p.TTL/4 + time.Duration(wk.rng.Int64N(int64(wl.p.TTL/2)))
		var reader sync.WaitGroup
		if wl.p.Bias == UnraisedReaders {
			// A waiter wakes at the writer's end by the claim's hint
			// or its retry delay: give it a TTL more to come in.
			u := wl.drawUse(wk)
			reader.Go(func() { wl.rwTake(ctx, wk, false, u) })
			past += wl.p.TTL
		}
		sleepPast(l, past)
		if wl.write(wl.rwRes, l, wk) != nil {
			wl.pausedRefused.Add(1)
		}
		reader.Wait()
		wl.rwRes.Released(l)
		rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
		_ = l.Release(rctx)
		rcancel()
	}
	wl.record(rwKey(name), start, l, at, ctx.Err() != nil)
}

// readBehind is a read of the register by a reader valid by its own clock
// that found the register written under a newer token than its own.
type readBehind struct {
	reader  string
	token   fence.Token // the reader's
	granted time.Time   // the reader's grant
	at      time.Time   // the read's call
	seen    fence.Token // the register's
}

// rwRead reads the read-write lock's register for the reader holding l,
// granted at granted: the read itself is checked with the writers' (the
// register linearizable); a fence that keeps the highest token it has
// seen would refuse the reader's act on it when l's token is older than
// the register's. Such a read by a reader whose lease is still valid by
// its own clock is counted and kept: rwBehindClasses names the fault that
// explains each, and finds the rest. A reader whose lease ran out (its
// renewal refused under a fault) is refused rightly, and not counted.
func (wl *workload) rwRead(l *lease.Lease, granted time.Time) {
	call := time.Now()
	_, t, err := wl.rwRes.Read(context.Background())
	if err != nil {
		return
	}
	wl.reads.Add(1)
	if l.Token() < t && l.TTL() > 0 {
		wl.rwReadsBehind.Add(1)
		wl.mu.Lock()
		wl.behind = append(wl.behind, readBehind{reader: l.Owner(), token: l.Token(), granted: granted, at: call, seen: t})
		wl.mu.Unlock()
	}
}

// rwViolations checks the read-write lock's histories: the writers'
// register as a lock key's (FENCE), writers against each other and
// against readers (ME, with safety.CheckShared, which covers the
// overlaps of writers that the register's own check would count again),
// the writers' tokens (ORDER), all judged by ws; and, judged by ws, the
// readers' windows (readerWindows) and the classes of reads behind: the
// readers' tokens (ORDER, safety.CheckSharedOrder), the writers' late
// writes against the readers after them (FENCE, rwLateWrites), and the
// valid readers' reads behind (rwBehindClasses).
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
	kept := readerWindows(ws)
	readerWs = slices.Concat(ws, kept)
	for _, w := range kept {
		w.Property = safety.Fencing
		readerWs = append(readerWs, w)
	}
	readerVs = append(safety.CheckSharedOrder(writers, readers), wl.rwLateWrites(readers)...)
	behindVs, behindWs := wl.rwBehindClasses(events, writers, readers, kept)
	return vs, append(readerVs, behindVs...), append(readerWs, behindWs...)
}

// rwLateWrites returns a FENCE violation for each write of a writer that
// the register accepted after a reader was granted once that writer's
// hold had ended (its validity by its own clock: a paused writer's late
// write), when the reader's token is not above the write's: a fence that
// reader had shown its token to would still admit the write while it
// reads. The first reader after a writer raises the counter
// (docs/rwlock.md), so each is a promise broken, but where the reader
// carries a counter kept through a loss of grants, below the writer's
// (readerWindows, as FENCE). Dated by that reader's grant; a reader's
// token equal to the writer's is not dated (see below).
func (wl *workload) rwLateWrites(readers []safety.Acquisition) []safety.Violation {
	h := wl.rwRes.History()
	ended := map[string]time.Time{}
	for _, hd := range h.Holds(false) {
		ended[hd.Holder] = hd.Until
	}
	granted := slices.DeleteFunc(slices.Clone(readers), func(a safety.Acquisition) bool { return a.Granted.IsZero() })
	slices.SortFunc(granted, func(a, b safety.Acquisition) int { return a.Granted.Compare(b.Granted) })
	var vs []safety.Violation
	for _, op := range h.Ops {
		if op.Kind != safety.Write || op.Outcome != safety.Accepted || op.Holder == "" {
			continue
		}
		end := ended[op.Holder]
		for _, r := range granted {
			if !r.Granted.Before(op.Call) {
				break
			}
			if r.Granted.After(end) && r.Token <= op.Token {
				// The reader's token equal to the writer's is the rule
				// switched off, whatever the faults: a reader's raise
				// leaves attempts above every writer's, and a restored
				// rtoken equal to attempts means a reader's raise came
				// last. Undated, no window excuses it.
				at := r.Granted
				if r.Token == op.Token {
					at = time.Time{}
				}
				vs = append(vs, safety.Violation{Property: safety.Fencing, At: at, Detail: fmt.Sprintf(
					"late write accepted: writer %s wrote under token %s at %s, its hold ended at %s; reader %s was granted at %s with token %s, which a fence cannot tell from it",
					op.Holder, op.Token, safety.Stamp(op.Call), safety.Stamp(end), r.Holder, safety.Stamp(r.Granted), r.Token)})
				break
			}
		}
	}
	return vs
}

// The classes of reads behind: a valid reader's read of a register
// written under a newer token than its own. Each is reported as a
// violation of its own property, excused by the window of the fault that
// explains it (so Result.Excused counts them by class); a read behind that
// no fault explains is a FENCE violation. docs/trade.md gives the rule of
// each.
const (
	// behindClock: the writer whose write the reader saw was granted
	// within a clock fault's window: the server's clock stepped forward
	// and ended the reader's lease early there, while the reader's own
	// clock still counted it valid.
	behindClock safety.Property = "BEHIND:clock"
	// behindLostGrant: that writer was granted within the window of a
	// loss of the master's latest writes (a kill of the master, a
	// failover): the reader's grant was lost with them.
	behindLostGrant safety.Property = "BEHIND:lost-grant"
	// behindKeptCounter: the reader's token was drawn (tokenDrawn) within
	// a readers' window (readerWindows, a loss near a clock fault): the
	// counter the first reader raised on the new server process, floored
	// at a clock the fault put behind, is below the token of a writer
	// granted before the loss, whose write the register holds.
	behindKeptCounter safety.Property = "BEHIND:kept-counter"
)

// behindKinds are the classes, in the order reports show them.
var behindKinds = []safety.Property{behindClock, behindLostGrant, behindKeptCounter}

// rwBehindClasses sorts the valid readers' reads behind into their classes:
// one violation each, of the class's property and dated by the writer's
// grant (behindClock, behindLostGrant) or the draw of the reader's token
// (behindKeptCounter),
// with the windows that excuse them; or FENCE, with none, when no class
// fits. kept are the readers' windows.
func (wl *workload) rwBehindClasses(events []*Event, writers, readers []safety.Acquisition, kept []safety.Window) ([]safety.Violation, []safety.Window) {
	wl.mu.Lock()
	rbs := slices.Clone(wl.behind)
	wl.mu.Unlock()
	var ws []safety.Window
	linger := Linger(wl.p)
	for _, e := range events {
		if e.Skipped != "" || e.Start.IsZero() {
			continue
		}
		switch {
		case e.Kind == ClockForward || e.Kind == ClockBack:
			ws = append(ws, safety.Window{Property: behindClock, From: e.Start, To: e.End.Add(linger), Why: e.String()})
		case e.LostData():
			ws = append(ws, safety.Window{Property: behindLostGrant, From: e.Start, To: e.End.Add(linger), Why: e.String()})
		}
	}
	for _, w := range kept {
		w.Property = behindKeptCounter
		ws = append(ws, w)
	}
	byToken := map[fence.Token]safety.Acquisition{}
	for _, a := range writers {
		if _, ok := byToken[a.Token]; !a.Granted.IsZero() && !ok {
			byToken[a.Token] = a
		}
	}
	covered := func(p safety.Property, at time.Time) bool {
		return slices.ContainsFunc(ws, func(w safety.Window) bool {
			return w.Covers(safety.Violation{Property: p, At: at})
		})
	}
	var vs []safety.Violation
	for _, rb := range rbs {
		w, ok := byToken[rb.seen]
		detail := fmt.Sprintf("read behind: reader %s (token %s, granted at %s) read at %s the register under token %s",
			rb.reader, rb.token, safety.Stamp(rb.granted), safety.Stamp(rb.at), rb.seen)
		v := safety.Violation{Property: safety.Fencing, At: rb.granted, Detail: detail + ", which no fault explains"}
		if ok {
			detail += fmt.Sprintf(", written by %s granted at %s", w.Holder, safety.Stamp(w.Granted))
			v = safety.Violation{Property: safety.Fencing, At: w.Granted, Detail: detail + ", which no fault explains"}
		}
		switch {
		case ok && covered(behindClock, w.Granted):
			v = safety.Violation{Property: behindClock, At: w.Granted, Detail: detail}
		case ok && covered(behindLostGrant, w.Granted):
			v = safety.Violation{Property: behindLostGrant, At: w.Granted, Detail: detail}
		case covered(behindKeptCounter, tokenDrawn(readers, rb.token, w.Granted, rb.granted)):
			v = safety.Violation{Property: behindKeptCounter, At: tokenDrawn(readers, rb.token, w.Granted, rb.granted), Detail: detail}
		}
		vs = append(vs, v)
	}
	return vs, ws
}

// tokenDrawn is when the readers' token was drawn, as safety's
// CheckSharedOrder dates it: the first grant of a reader with token after
// since (the grant of the writer whose write was read; zero for none),
// the raise that the readers after it share; granted (the reader's own
// grant) when there is none.
func tokenDrawn(readers []safety.Acquisition, token fence.Token, since, granted time.Time) time.Time {
	at := granted
	for _, r := range readers {
		if r.Token == token && !r.Granted.IsZero() && r.Granted.After(since) && r.Granted.Before(at) {
			at = r.Granted
		}
	}
	return at
}

// readerWindows are the stretches in which the readers' tokens are not
// promised to keep their order: the single strategy's ORDER windows, a
// loss of the master's latest grants near a clock fault (Windows). The
// first reader on a new server process raises the counter, floored at
// its clock (docs/rwlock.md), so after a restart or a failover the
// readers' token is above a lost writer's under the same clock condition
// as the writers' own; a kept counter is not carried past a loss.
func readerWindows(ws []safety.Window) []safety.Window {
	var out []safety.Window
	for _, w := range ws {
		if w.Property == safety.Order {
			out = append(out, w)
		}
	}
	return out
}
