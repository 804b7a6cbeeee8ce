package single

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// MaxKeys is the most keys AcquireAll and TryAcquireAll take at once.
const MaxKeys = 64

// TryAcquireAll makes one attempt at the locks of every key in keys, all
// or none: it returns one lease holding them all, with a token per key
// (lease.Lease.Keys, TokenOf), or an error matching lease.ErrTaken when any
// key is held by someone else or has waiters queued for it, having taken
// none. Every key is a lock as Acquire's: held in a set, it is held against
// Acquire of that key alone, and the other way round. The keys must be
// distinct. On a Redis Cluster, keys of one slot (one hash tag,
// {like}this) are one script; keys of several slots are taken key by key,
// in the order of their names, and the keys taken are released again at
// the first refused, so all or none still holds (docs/multikey.md). It returns
// an *lease.ArgError for no keys, more than MaxKeys, a repeat or a bad key
// or option. As for TryAcquire, a claim whose outcome is unknown is given
// up before it returns.
func (lk *Locker) TryAcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, firstKey(keys)).End(lk.tryAcquireAll(ctx, keys, opts))
}

func (lk *Locker) tryAcquireAll(ctx context.Context, keys []string, opts []option.Option) (*lease.Lease, error) {
	c, err := lk.newSetClaim(ctx, keys, opts)
	if err != nil {
		return nil, err
	}
	l, _, err := c.try(ctx)
	return l, err
}

// AcquireAll waits until it holds the locks of every key in keys, or ctx
// ends, with TryAcquireAll's rules. A waiter for a set queues, first come,
// first served, on every key of it at once, in one script: waiters of
// overlapping sets are then in the same order in every queue they share,
// so none waits for another that waits for it, whatever order the keys
// were given in, and a set is served when each of its keys is free and
// the set's waiter is at the head of each queue. While it waits for the
// rest, a key handed to it by a release stays its own until that lease
// ends (its TTL or its ticket's deadline), and its other keys wait on it:
// the cost of a set is that a free key may wait for a busy one. When ctx
// ends first, the error matches ctx.Err(), and no lock or place in a queue
// of this call is left on the server.
func (lk *Locker) AcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, firstKey(keys)).End(lk.acquireAll(ctx, keys, opts))
}

func (lk *Locker) acquireAll(ctx context.Context, keys []string, opts []option.Option) (*lease.Lease, error) {
	c, err := lk.newSetClaim(ctx, keys, opts)
	if err != nil {
		return nil, err
	}
	life := engine.TicketLife(c.o.Retry)
	c.args = append(c.args, strconv.FormatInt(life.Milliseconds(), 10))
	var (
		wake       *setWake
		subscribed bool
	)
	l, err := engine.Wait(ctx, c.o.Retry, func(ctx context.Context) (*lease.Lease, engine.Turn, error) {
		l, hint, err := c.again(ctx)
		if err != nil && engine.Again(err) && !subscribed && ctx.Err() == nil {
			// Subscribed, then one more attempt at once, as Acquire does.
			subscribed = true
			sctx, cancel := context.WithTimeout(ctx, life/2)
			wake = lk.subscribeAll(sctx, c.hashes)
			cancel()
			l, hint, err = c.again(ctx)
		}
		t := engine.Turn{Hint: hint}
		if wake != nil {
			t.Wake = wake.c
		}
		return l, t, err
	})
	if wake != nil {
		wake.stop()
	}
	if err != nil && c.queued {
		engine.Cleanup(ctx, lk.n, leaveAllScript, c.hashes, c.args[0])
	}
	return l, err
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// setClaim is one acquisition of a set, and then the backend of the
// lease it was granted.
type setClaim struct {
	lk     *Locker
	keys   []string // as the caller gave them
	hashes []string // each key's hash, in the same order
	o      settings.Call
	ttl    time.Duration // o.TTL in whole milliseconds
	// The claim script's arguments: owner, TTL ms, the hashes' lifetime
	// ms, and for AcquireAll the tickets' lifetime ms.
	args   []string
	queued bool // a refusal left tickets on the server
	// Once granted: the owner and each key's token, as extend and release
	// send them.
	owner  string
	tokens []string
	// ordered: the keys span cluster slots, so no one script can claim
	// them; each attempt takes them one by one (tryOrdered).
	ordered bool
}

func (lk *Locker) newSetClaim(ctx context.Context, keys []string, opts []option.Option) (*setClaim, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	switch {
	case len(keys) == 0:
		return nil, &lease.ArgError{Arg: "keys", Value: keys, Rule: "must hold at least one key"}
	case len(keys) > MaxKeys:
		return nil, &lease.ArgError{Arg: "keys", Value: len(keys), Rule: fmt.Sprintf("must hold at most %d keys (single.MaxKeys)", MaxKeys)}
	}
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if err := engine.CheckKey(k); err != nil {
			var ae *lease.ArgError
			if errors.As(err, &ae) {
				return nil, &lease.ArgError{Arg: "keys[" + strconv.Itoa(i) + "]", Value: k, Rule: ae.Rule}
			}
			return nil, err
		}
		if j, ok := seen[k]; ok {
			return nil, &lease.ArgError{Arg: "keys[" + strconv.Itoa(i) + "]", Value: k, Rule: "must not repeat keys[" + strconv.Itoa(j) + "]"}
		}
		seen[k] = i
	}
	o, err := lk.options(ctx, keys[0], lk.cfg.TTL, opts)
	if err != nil {
		return nil, err
	}
	c := &setClaim{lk: lk, keys: keys, o: o, hashes: make([]string, len(keys))}
	for i, k := range keys {
		c.hashes[i] = hashKey(k)
	}
	var ttlMs, keepMs string
	c.ttl, ttlMs, keepMs = lk.kit.LeaseArgs(o.TTL)
	c.args = []string{engine.OwnerValue(engine.NewOwner(), o.Metadata), ttlMs, keepMs}
	return c, nil
}

// again is try for a blocking acquire (see againOf).
func (c *setClaim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	return againOf(c.try(ctx))
}

// try runs the set's claim script once, as claim.try does for one key.
func (c *setClaim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	if c.ordered {
		return c.tryOrdered(ctx)
	}
	lk := c.lk
	t1 := time.Now()
	r, acked, err, lost := lk.exchange(ctx, claimAllScript, c.hashes, c.args)
	if lost != nil {
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("single: claim of %q on %s: %w", c.keys, lk.n, ctxerr.Wrap(ctx, lost))
	}
	if err != nil {
		if re := replyError(err); strings.HasPrefix(re.Msg, "CROSSSLOT") {
			// A cluster whose slots the keys span: the script ran nowhere.
			c.ordered = true
			return c.tryOrdered(ctx)
		}
		if re := replyError(err); strings.Contains(re.Msg, "non local key") {
			return nil, 0, fmt.Errorf("single: claim of %q on %s: %w: %w", c.keys, lk.n, errMigrating, err)
		}
		return nil, 0, &engine.Refusal{Err: fmt.Errorf("single: claim of %q on %s: %w", c.keys, lk.n, ctxerr.Wrap(ctx, err))}
	}
	sr, err := readClaimAll(r, len(c.keys))
	if err != nil {
		// The script ran, and may have granted the set: give it up.
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("single: claim of %q on %s: %w", c.keys, lk.n, err)
	}
	if !sr.granted {
		c.queued = sr.queued
		return nil, sr.left, fmt.Errorf("single: %q: %w", c.keys, lease.ErrTaken)
	}
	c.queued = false
	c.owner = c.args[0]
	c.tokens = make([]string, len(sr.tokens))
	set := make([]leasing.Held, len(sr.tokens))
	for i, t := range sr.tokens {
		set[i] = leasing.Held{Key: c.keys[i], Token: t}
		c.tokens[i] = strconv.FormatInt(int64(t), 10)
	}
	until, err := lk.granted(ctx, t1, c.ttl, fmt.Sprintf("claim of %q", c.keys), "", c.keys[0], acked)
	if err != nil {
		// Released on every key, and the set goes on under a new owner
		// (see engine.Kit.ReleaseDetached).
		lk.setKit.ReleaseDetached(ctx, c.hashes, append([]string{c.owner}, c.tokens...))
		c.args[0] = engine.OwnerValue(engine.NewOwner(), c.o.Metadata)
		return nil, 0, err
	}
	return engine.NewLease(c, leasing.Grant{
		Key: c.keys[0], Owner: c.owner, Token: set[0].Token, Set: set, TTL: c.o.TTL, Until: until,
		Strategy: strategy, Reporter: lk.cfg.Reporter, AutoRenew: c.o.AutoRenew, Metadata: c.o.Metadata,
	}), 0, nil
}

// setReply is what claim_all.lua answered: a grant with each key's token,
// in the order of the keys, or a refusal with how long until the lock in
// the way may end and whether the set waits in the keys' queues.
type setReply struct {
	granted bool
	tokens  []fence.Token
	left    time.Duration
	queued  bool
}

// readClaimAll reads the reply of claim_all.lua to a claim of n keys: their
// n tokens, or a refusal's {-1, left ms, queued}.
// Any other reply is an error matching engine.ErrBadReply, and grants
// nothing.
func readClaimAll(r node.Reply, n int) (setReply, error) {
	if len(r) > 0 && r[0].Kind == node.Int && r[0].Int == -1 {
		if err := engine.ReplyLen(r, 3); err != nil {
			return setReply{}, err
		}
		left, err := engine.ReplyMs(r, 1)
		if err != nil {
			return setReply{}, err
		}
		queued, err := engine.ReplyInt(r, 2, 0, 1)
		return setReply{left: left, queued: queued == 1}, err
	}
	if len(r) != n {
		return setReply{}, fmt.Errorf("%w: %d tokens for %d keys", engine.ErrBadReply, len(r), n)
	}
	tokens := make([]fence.Token, len(r))
	for i := range r {
		t, err := engine.ReplyToken(r, i)
		if err != nil {
			return setReply{}, err
		}
		tokens[i] = t
	}
	return setReply{granted: true, tokens: tokens}, nil
}

// tryOrdered takes the keys one by one, in the order of their names, each
// with a single claim that does not wait, and gives back the ones it took
// as soon as one is refused or fails: all of them or none, at the cost of
// a moment in which the first keys were held and the set was not. It
// never holds a key while it waits for another, so sets over shared keys
// cannot wait for each other; the wait for a set (AcquireAll) is then
// retries on the keys' releases, not a place in their queues.
func (c *setClaim) tryOrdered(ctx context.Context) (*lease.Lease, time.Duration, error) {
	order := make([]int, len(c.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(c.keys[a], c.keys[b]) })
	po := c.o
	po.AutoRenew = false
	parts := make([]*lease.Lease, len(c.keys))
	rollback := func() {
		for _, p := range parts {
			if p != nil {
				rctx, cancel := engine.Detached(ctx, lease.ReleaseTimeout)
				_ = p.Release(rctx)
				cancel()
			}
		}
	}
	for _, i := range order {
		pc := c.lk.newClaim(c.keys[i], po)
		pc.part = true
		l, hint, err := pc.try(ctx)
		if err != nil {
			rollback()
			return nil, hint, err
		}
		parts[i] = l
	}
	set := make([]leasing.Held, len(parts))
	until := time.Time{}
	for i, p := range parts {
		set[i] = leasing.Held{Key: c.keys[i], Token: p.Token()}
		if u := time.Now().Add(p.TTL()); until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return engine.NewLease(&orderedSet{keys: c.keys, parts: parts}, leasing.Grant{
		Key: c.keys[0], Owner: c.args[0], Token: set[0].Token, Set: set, TTL: c.o.TTL, Until: until,
		Strategy: strategy, Reporter: c.lk.cfg.Reporter, AutoRenew: c.o.AutoRenew, Metadata: c.o.Metadata,
	}), 0, nil
}

// orderedSet is the backend of a set taken key by key: each key's
// own lease, extended and released one after the other.
type orderedSet struct {
	keys  []string
	parts []*lease.Lease
}

// Extend, for lease.Lease.Extend: every key's lease, in turn. A key that
// refuses loses the set; the keys extended before it stay so until their
// release or expiry.
func (s *orderedSet) Extend(ctx context.Context, _ *lease.Lease, ttl time.Duration) (time.Time, error) {
	var until time.Time
	for _, p := range s.parts {
		if err := p.Extend(ctx, ttl); err != nil {
			return time.Time{}, err
		}
		if u := time.Now().Add(p.TTL()); until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return until, nil
}

// Release, for lease.Lease.Release: every key's lease, whatever the
// others' outcome; the first error is returned.
func (s *orderedSet) Release(ctx context.Context, _ *lease.Lease) error {
	var first error
	for _, p := range s.parts {
		if err := p.Release(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// abandon gives up a claim whose outcome is unknown, on every key, and
// goes on under a new owner (see claim.abandon).
func (c *setClaim) abandon(ctx context.Context) {
	c.lk.setKit.Abandon(ctx, c.hashes, c.args[0], c.ttl, &c.queued)
	c.args[0] = engine.OwnerValue(engine.NewOwner(), c.o.Metadata)
}

// Extend, for lease.Lease.Extend: the whole set, or none of it.
func (c *setClaim) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return time.Time{}, &lease.ArgError{Arg: "ttl", Value: ttl, Rule: "must be at least 1ms"}
	}
	ttl = time.Duration(ms) * time.Millisecond
	args := append([]string{c.owner, strconv.FormatInt(ms, 10), c.lk.cfg.KeepMs(ttl)}, c.tokens...)
	t1 := time.Now()
	if _, err := c.lk.n.Eval(ctx, extendAllScript, c.hashes, args...); err != nil {
		return time.Time{}, c.refused(ctx, "extend", l, err)
	}
	return c.lk.cfg.Until(t1, ttl), nil
}

// Release, for lease.Lease.Release: every key of the set.
func (c *setClaim) Release(ctx context.Context, l *lease.Lease) error {
	r, err := c.lk.n.Eval(ctx, releaseAllScript, c.hashes, append([]string{c.owner}, c.tokens...)...)
	if err != nil {
		return c.refused(ctx, "release", l, err)
	}
	if r.Int(0) != 1 {
		return fmt.Errorf("single: release of %q: %w: a lease had expired", c.keys, lease.ErrNotHeld)
	}
	return nil
}

// refused is claim.refused for the set.
func (c *setClaim) refused(ctx context.Context, op string, l *lease.Lease, err error) error {
	return engine.Refused(ctx, "single", fmt.Sprintf("%s of %q", op, c.keys), c.lk.n, l, err)
}

// setWake merges the release channels of a set's keys into one: a message
// on any of them calls for an attempt. Its goroutines end with stop.
type setWake struct {
	c     chan string
	done  chan struct{}
	stops []func()
	wg    sync.WaitGroup
}

// subscribeAll subscribes to every hash's release channel; nil when not
// one subscription could be made (the wait then polls).
func (lk *Locker) subscribeAll(ctx context.Context, hashes []string) *setWake {
	w := &setWake{c: make(chan string, 1), done: make(chan struct{})}
	for _, h := range hashes {
		msgs, stop, err := lk.n.Subscribe(ctx, h+":released")
		if err != nil {
			continue
		}
		w.stops = append(w.stops, stop)
		w.wg.Go(func() {
			for {
				select {
				case <-w.done:
					return
				case _, ok := <-msgs:
					if !ok {
						return
					}
					select {
					case w.c <- "":
					default: // one signal pending is enough
					}
				}
			}
		})
	}
	if len(w.stops) == 0 {
		return nil
	}
	return w
}

func (w *setWake) stop() {
	close(w.done)
	for _, s := range w.stops {
		s()
	}
	w.wg.Wait()
}
