package quorum

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

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
	return lk.wait(ctx, keys, ls.channels, nil, ls, o)
}

// leaveSet is leave for a waiter on the locks of ls.
func (lk *Locker) leaveSet(ctx context.Context, ls *lockSet, w *waiter, idx []int, ttl time.Duration) {
	args := append([]string{w.id}, ls.channels...)
	r := lk.fanout(context.WithoutCancel(ctx), idx, lk.cleanupTimeout(ttl),
		request{script: leaveSetScript, keys: ls.leave, args: args}, nil)
	r.abandon()
}

// setOptions checks the arguments of an acquisition of keys, all or
// nothing, and returns its options.
func (lk *Locker) setOptions(ctx context.Context, keys []string, opts []option.Option) (settings.Call, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return settings.Call{}, err
	}
	if err := checkKeys(keys); err != nil {
		return settings.Call{}, err
	}
	return lk.options(ctx, keys[0], lk.cfg.TTL, opts)
}

// checkKeys returns an *lease.ArgError when keys cannot name a set of
// locks: none, more than MaxKeys, an empty key or a repeated one.
func checkKeys(keys []string) error {
	switch {
	case len(keys) == 0:
		return &lease.ArgError{Arg: "keys", Value: len(keys), Rule: "must hold at least one key"}
	case len(keys) > MaxKeys:
		return &lease.ArgError{Arg: "keys", Value: len(keys), Rule: fmt.Sprintf("must hold at most %d keys (quorum.MaxKeys)", MaxKeys)}
	}
	seen := make(map[string]int, len(keys))
	for i, key := range keys {
		arg := "keys[" + strconv.Itoa(i) + "]"
		if key == "" {
			return &lease.ArgError{Arg: arg, Value: key, Rule: "must not be empty"}
		}
		if j, ok := seen[key]; ok {
			return &lease.ArgError{Arg: arg, Value: key, Rule: "must not repeat keys[" + strconv.Itoa(j) + "]"}
		}
		seen[key] = i
	}
	return nil
}

// first returns keys[0], or "" for none: the key an acquisition of keys is
// reported under.
func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
