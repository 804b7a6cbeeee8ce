package election

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

// The announcements a term publishes on its office's lock (see
// Locker.Publish), each followed by a space and the term's token: elected
// once it holds the office, and again at about half its lease's time left
// (so that an observer that missed one hears the next); ended once it
// resigned or lost the office.
const (
	msgElected = "elected"
	msgEnded   = "ended"
)

// minBeat bounds how often a term repeats its announcement.
const minBeat = 10 * time.Millisecond

// Term is one leader's time in office: a lease on the office's lock,
// renewed in the background until Resign or its loss. Its methods are safe
// for concurrent use.
type Term struct {
	e     *Election
	l     *lease.Lease
	value string

	// ctx ends at Resign; it bounds the term's announcements.
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{} // closed when run returns
	// observed says the term's end was reported to the Observer: once,
	// by run (a loss) or by the first Resign.
	observed atomic.Bool
}

// Campaign waits until this caller is elected to the office, or ctx ends.
// value says who the leader is (a host, an address): Leader and Observe
// report it, and Inspect shows it as the lock's metadata. It must not be
// empty, and is at most lease.MaxMetadata bytes; otherwise Campaign returns
// an *lease.ArgError. Candidates are elected in the order the Locker grants
// its lock (first come, first served for both strategies); a leader that
// dies without resigning holds the office until its lease runs out.
//
// When ctx ends first, the error matches ctx.Err() and nothing of this
// campaign is left on the servers (see dlock.Locker's Acquire). On a Locker
// whose leases carry no fencing token, Campaign gives the office back up
// and returns an error matching ErrUnfenced.
//
// The Term starts one goroutine, which ends at Resign or soon after the
// term is lost (once it has announced the loss, bounded by
// lease.ReleaseTimeout): call Resign in either case.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	ob := engine.Start(e.obs, strategy, e.key)
	t, err := e.campaign(ctx, value)
	if err != nil {
		ob.End(nil, err)
		return nil, err
	}
	ob.End(t.l, nil)
	return t, nil
}

func (e *Election) campaign(ctx context.Context, value string) (*Term, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	if value == "" {
		return nil, &lease.ArgError{Arg: "value", Value: value, Rule: "must not be empty"}
	}
	if len(value) > lease.MaxMetadata {
		return nil, &lease.ArgError{Arg: "value", Value: fmt.Sprintf("%d bytes", len(value)),
			Rule: fmt.Sprintf("must be at most %d bytes (lease.MaxMetadata)", lease.MaxMetadata)}
	}
	opts := append(e.opts[:len(e.opts):len(e.opts)], option.Metadata(value))
	l, err := e.lk.Acquire(ctx, e.key, opts...)
	if err != nil {
		return nil, fmt.Errorf("election: campaign for %q: %w", e.name, err)
	}
	if !l.Fenced() {
		err := l.Release(ctx)
		return nil, fmt.Errorf("election: campaign for %q: %w", e.name, errors.Join(ErrUnfenced, err))
	}
	t := &Term{e: e, l: l, value: value, stopped: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	go t.run()
	return t, nil
}

// Value returns what the leader campaigned with.
func (t *Term) Value() string { return t.value }

// Token returns the term's fencing token: larger than every earlier
// term's of the office. Carry it into every write the leader makes to a
// fenced resource, which then refuses a paused leader's writes once its
// successor's have arrived.
func (t *Term) Token() fence.Token { return t.l.Token() }

// TTL returns the time the term's lease has left by the local monotonic
// clock, drift taken off; 0 once the term has ended.
func (t *Term) TTL() time.Duration { return t.l.TTL() }

// Done returns a channel closed when the term ends: resigned, or lost (its
// lease expired, or a renewal was refused).
func (t *Term) Done() <-chan struct{} { return t.l.Done() }

// Err returns nil while the term lasts, then why it ended: lease.ErrReleased
// after Resign, lease.ErrExpired or lease.ErrLost when leadership was lost.
func (t *Term) Err() error { return t.l.Err() }

// Context returns a context derived from parent that is cancelled, with
// the term's end as its cause, when the term ends: give it to the work
// only a leader may do.
func (t *Term) Context(parent context.Context) context.Context { return t.l.Context(parent) }

// Resign gives the office up: it stops the term's goroutine, releases the
// lock (the next candidate is elected at once) and announces the end to
// observers. When ctx has already ended, the release and the announcement
// still run, on a context of their own bounded by lease.ReleaseTimeout.
// Call it also after the term was lost, to end its goroutine; it then
// returns an error matching lease.ErrNotHeld, as it does when called
// again.
func (t *Term) Resign(ctx context.Context) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	t.cancel()
	<-t.stopped
	if cause := t.l.Err(); cause != nil && !errors.Is(cause, lease.ErrReleased) {
		t.observe(observe.Lost, cause) // lost before run saw it
	}
	if err := t.l.Release(ctx); err != nil {
		t.observe(observe.Released, err)
		return fmt.Errorf("election: resign %q: %w", t.e.name, err)
	}
	t.observe(observe.Released, nil)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = engine.Detached(ctx, lease.ReleaseTimeout)
		defer cancel()
	}
	t.announce(ctx, msgEnded)
	return nil
}

// run announces the term, repeats the announcement until Resign or the
// term's end, and announces a loss.
func (t *Term) run() {
	defer close(t.stopped)
	done := t.l.Done()
	beat := t.beat()
	t.announceFor(beat, msgElected)
	timer := time.NewTimer(beat)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-done:
			t.observe(observe.Lost, t.l.Err())
			t.announceFor(lease.ReleaseTimeout, msgEnded)
			return
		case <-timer.C:
			beat = t.beat()
			if t.l.Err() == nil {
				t.announceFor(beat, msgElected)
			}
			timer.Reset(beat)
		}
	}
}

// observe reports the term's end to the election's Observer, if any, the
// first time it is called.
func (t *Term) observe(kind observe.EventKind, err error) {
	if t.e.obs != nil && t.observed.CompareAndSwap(false, true) {
		t.e.obs.Observe(observe.Event{Kind: kind, Strategy: strategy, Key: t.e.key, Err: err})
	}
}

// beat is the time to the next repeat of the announcement: half the
// lease's time left, which a renewal restores to about its TTL.
func (t *Term) beat() time.Duration { return max(t.l.TTL()/2, minBeat) }

// announceFor publishes kind on a context that Resign ends, bounded by d
// (and by lease.ReleaseTimeout).
func (t *Term) announceFor(d time.Duration, kind string) {
	ctx, cancel := context.WithTimeout(t.ctx, min(d, lease.ReleaseTimeout))
	defer cancel()
	t.announce(ctx, kind)
}

// announce publishes kind with the term's token. A failure costs observers
// only time: they hear the next announcement, or find the end of a lease
// at the expiry they already know of.
func (t *Term) announce(ctx context.Context, kind string) {
	_ = t.e.lk.Publish(ctx, t.e.key, kind+" "+t.l.Token().String())
}
