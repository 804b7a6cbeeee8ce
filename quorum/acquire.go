package quorum

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

// TryAcquire makes exactly one attempt at the lock on key. It returns an
// error matching lease.ErrTaken when a majority of the nodes hold the lock
// for someone else, and a *Error whenever the attempt failed, with
// each node's answer.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, false))
}

// Acquire waits until the lock on key is granted or ctx ends. A failed
// attempt, whatever the reason (taken, split vote, nodes down, too slow), is
// retried after a jittered delay, cut short when a release is published on
// any node. Waiters take turns: a refused attempt puts this call in a
// first-come, first-served queue on each node, ordered by the time of its
// first attempt, and a free lock goes to the queue's head only (also
// against TryAcquire); a release wakes only the earliest waiter of this
// Locker. The call leaves the queues when it gives up. When ctx ends
// first, the error matches ctx.Err(), and errors.As finds the *Error
// of the last attempt that failed for want of a quorum; it matches
// lease.ErrTaken only when that attempt found the lock held by a majority,
// not when nodes were down or slow. After Close it matches ErrClosed.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, true))
}

// acquire is TryAcquire, or Acquire when wait is set.
func (lk *Locker) acquire(ctx context.Context, key string, opts []option.Option, wait bool) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, lk.cfg.TTL, opts)
	if err != nil {
		return nil, err
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	ks := newKeySet(key)
	if !wait {
		l, _, err := lk.attempt(ctx, ks, o, nil)
		return l, err
	}
	return lk.wait(ctx, ks, nil, o)
}

// MaxKeys is the most keys one AcquireAll or TryAcquireAll takes: each
// node votes for the whole set in one script, which holds the node for
// the set's length, and each key adds five keys to that call.
const MaxKeys = 64

// TryAcquireAll makes exactly one attempt at the locks on every key of
// keys, all or nothing (see AcquireAll). It returns an error matching
// lease.ErrTaken when a majority of the nodes refuse the set because a key
// of it is held by someone else (or promised to an earlier waiter), and a
// *Error whenever the attempt failed, with each node's answer and
// the keys joined by commas as its Key; the failed attempt leaves no key
// of the set held on any node.
func (lk *Locker) TryAcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, first(keys)).End(lk.acquireAll(ctx, keys, opts, false))
}

// AcquireAll waits until the locks on every key of keys are granted to one
// lease, or ctx ends: all or nothing, with a fencing token per key (see
// lease.Lease.Keys and TokenOf), each ordered with every other lease's
// token on that key, those of Acquire included. A key held this way
// excludes Acquire of that key alone, and the other way round. Extend,
// Release, auto-renewal and Done act on the whole set.
//
// Each node votes for the whole set in one script: it grants every key to
// this call, or none when any key is held there by another owner or
// promised to an earlier waiter. The set is granted when a majority of
// the nodes granted it within the validity, as Acquire's single key is;
// an attempt that falls short releases the set on every node, so a
// failed call leaves no key held. Waiting is Acquire's: a refused attempt
// takes a ticket in the queue of every key of the set on each node, all
// scored by the time of its first attempt, and the earliest waiter heads
// every queue it is in. So callers asking for overlapping sets, in any
// order, cannot hold parts of them against each other: no deadlock, and
// each in turn becomes the earliest waiter and is served next. Releases
// of any key of the set wake the call; the retry delay remains the
// fallback.
//
// Bad arguments, each an *lease.ArgError sent to no server: no keys, more
// than MaxKeys, an empty key, a key repeated. One key is Acquire's lease
// (its Keys lists that key). When ctx ends first, the error matches
// ctx.Err() as Acquire's does, with the keys joined by commas as the
// *Error's Key.
func (lk *Locker) AcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, first(keys)).End(lk.acquireAll(ctx, keys, opts, true))
}

// acquireAll is TryAcquireAll, or AcquireAll when wait is set.
func (lk *Locker) acquireAll(ctx context.Context, keys []string, opts []option.Option, wait bool) (*lease.Lease, error) {
	o, err := lk.setOptions(ctx, keys, opts)
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		return lk.acquire(ctx, keys[0], opts, wait)
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	ls := newLockSet(keys, lk.cfg.Tokens)
	if !wait {
		l, _, err := lk.attemptSet(ctx, ls, o, nil)
		return l, err
	}
	return lk.wait(ctx, nil, ls, o)
}

// wait is Acquire's, and AcquireAll's: attempts at the lock of ks, or of
// the set ls when it is not nil, until one grants or ctx ends, the waiter
// in the queue of each key and woken by the releases published on each
// key's channel.
func (lk *Locker) wait(ctx context.Context, ks *keySet, ls *lockSet, o settings.Call) (*lease.Lease, error) {
	parts := 1
	if ls != nil {
		parts = len(ls.ks)
	}
	part := func(j int) *keySet {
		if ls != nil {
			return ls.ks[j]
		}
		return ks
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(lk.closing, func() { cancel(ErrClosed) })()

	listening := false
	wake := make(chan string, 1)
	at := time.Now().UnixMicro()
	life := engine.TicketLife(o.Retry)
	w := &waiter{
		id:    engine.NewOwner(),
		at:    at,
		score: strconv.FormatInt(at, 10),
		life:  strconvMs(life),
		wake:  wake,
	}
	w.hands.span = min(o.TTL, life)
	defer func() {
		w.hands.end()
		if listening {
			for j := range parts {
				lk.unlisten(part(j).key, w)
			}
		}
	}()
	l, err := engine.Wait(ctx, o.Retry, func(ctx context.Context) (*lease.Lease, engine.Turn, error) {
		var (
			l    *lease.Lease
			hint time.Duration
			err  error
		)
		switch b := w.hands.take(lk.Quorum()); {
		case ls != nil:
			l, hint, err = lk.attemptSet(ctx, ls, o, w)
		case b != nil:
			// A majority handed the lock to the latest attempt.
			l, hint, err = lk.conclude(ctx, b)
		default:
			l, hint, err = lk.attempt(ctx, ks, o, w)
		}
		turn := engine.Turn{Hint: hint, Wake: wake}
		var qe *Error
		if !errors.As(err, &qe) {
			return l, turn, err
		}
		w.queued = true
		if !listening && ctx.Err() == nil {
			// A release of any key may free the set: the waiter listens
			// on each, and is woken as the earliest waiter of that key.
			listening = true
			for j := range parts {
				p := part(j)
				lk.listen(p.key, p.channel, o.TTL, w)
			}
		}
		if errors.Is(err, lease.ErrTaken) {
			return nil, turn, err
		}
		if qe.refusedCredentials() {
			// So many nodes refuse the credentials that a majority is
			// out of reach until someone fixes them: retrying would only
			// hide the cause behind the caller's deadline.
			return nil, turn, err
		}
		// Redlock retries every other failure, but a quorum short of
		// answers must not read as a lock taken.
		return nil, turn, engine.Retryable(err)
	})
	if err != nil && w.queued {
		if ls != nil {
			lk.leaveSet(ctx, ls, w, lk.all(), o.TTL)
		} else {
			lk.leave(ctx, ks, w, lk.all(), o.TTL)
		}
	}
	return l, err
}

// waiter is one Acquire's place in the queues of the nodes: its id and
// score (the time of its first attempt, µs, by the local clock; ties are
// broken by id) stay the same across its attempts, so it keeps its place.
type waiter struct {
	id     string
	at     int64 // the score, µs
	score  string
	wake   chan<- string
	life   string // how long a ticket outlives the attempt that refreshed it (engine.TicketLife), ms
	queued bool   // an attempt was refused: the waiter may hold a ticket on any node
	hands  hands  // the grants releases made to its latest attempt at one lock
	tries  int    // its attempts at one lock so far, which number them (lua/ticket.lua)
}

// leave takes w's tickets off the nodes at idx, in the background (the
// calls are counted in the Locker's WaitGroup, so Close waits for them):
// the waiter, acquiring leases of ttl, gave up.
func (lk *Locker) leave(ctx context.Context, ks *keySet, w *waiter, idx []int, ttl time.Duration) {
	if len(idx) == 0 {
		return
	}
	r := lk.fanout(context.WithoutCancel(ctx), idx, lk.cleanupTimeout(ttl),
		request{script: leaveScript, keys: ks.release[:4], args: []string{w.id, ks.channel}}, nil)
	r.abandon()
}

// observeVote reports one node's phase 1 answer to the observer, which
// must be set.
func (lk *Locker) observeVote(key string, v *vote, rtt time.Duration) {
	var outcome string
	switch v.answer.Kind {
	case KindOK:
		outcome = "ok"
	case KindHeld:
		outcome = "taken"
	case KindTimeout:
		outcome = "timeout"
	case KindSitsOut:
		outcome = "sits_out"
	default:
		outcome = "error"
	}
	lk.cfg.Observer.Observe(observe.Event{
		Kind: observe.Vote, Strategy: strategy, Key: key, Node: v.answer.Node,
		Outcome: outcome, Wait: rtt, Err: v.answer.Err,
	})
}
