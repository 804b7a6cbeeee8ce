package rwlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// kind tells a writer's claim from a reader's, as the scripts get it.
type kind string

const (
	writer kind = "w"
	reader kind = "r"
)

// strategy names this package in the leases it grants.
const strategy = "rwlock"

// claim is one acquisition: its attempts, and then the lease.Backend of
// the lease it was granted. The Lease serialises the Backend calls, and
// no attempt runs once it exists.
type claim struct {
	lk   *Locker
	key  string
	kind kind
	o    lease.Options
	ttl  time.Duration // o.TTL in whole milliseconds, as the server gets it
	keys [1]string     // the lock's hash
	// The claim script's arguments: owner, kind, TTL ms, the hash's
	// lifetime ms and, for a blocking acquire, the ticket's lifetime ms.
	args  [5]string
	nargs int       // 4, or 5 to join the queue when refused
	held  [3]string // once granted: owner, kind, token, as extend and release send them
	queue bool      // a refusal put the owner in the queue, and no grant or leave took it out since
}

// refusal is the server's error reply to a claim: the script refused, or
// the server would not run it, and nothing was written. It is the one
// failure of an attempt that a blocking acquire does not retry.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// errLate is the cause of a claim granted after its validity had run out
// on the way: it has been released again.
var errLate = errors.New("rwlock: granted after its validity ran out on the way")

func (lk *Locker) newClaim(key string, k kind, o lease.Options) *claim {
	c := &claim{lk: lk, key: key, kind: k, o: o, nargs: 4, keys: [1]string{KeyOf(key)}}
	ms := o.TTL.Milliseconds()
	c.ttl = time.Duration(ms) * time.Millisecond
	c.args[1] = string(k)
	if o.TTL == lk.cfg.ttl {
		c.args[2], c.args[3] = lk.ttlMs, lk.keepMs
	} else {
		c.args[2], c.args[3] = strconv.FormatInt(ms, 10), lk.keep(c.ttl)
	}
	c.drawOwner()
	return c
}

// drawOwner gives the claim a new random owner: at first, and after its
// owner was abandoned, which the claim script refuses from then on.
func (c *claim) drawOwner() {
	c.args[0] = acquire.OwnerValue(acquire.NewOwner(), c.o.Metadata)
}

func (c *claim) what() string {
	if c.kind == writer {
		return "write lock"
	}
	return "read lease"
}

// again is try for a blocking acquire, which retries every failure but
// the server's refusal: a grant that came too late to be used is one more
// attempt that found the lock taken.
func (c *claim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	l, hint, err := c.try(ctx)
	var r *refusal
	switch {
	case err == nil, errors.Is(err, lease.ErrTaken):
		return l, hint, err
	case errors.Is(err, errLate):
		return nil, 0, fmt.Errorf("%w (%w)", lease.ErrTaken, err)
	case errors.As(err, &r):
		return nil, 0, err
	}
	// A lost connection or a timeout (the claim abandoned): worth another
	// attempt.
	return nil, 0, acquire.Retryable(err)
}

// claimReply is what claim.lua answered: a grant of token, or a refusal
// with how long until the lease in the way may end and whether the claim
// waits in the queue.
type claimReply struct {
	granted bool
	token   fence.Token
	left    time.Duration
	queued  bool
}

// readClaim reads the reply of claim.lua: a grant's token, alone, or a
// refusal's {left ms, place in the queue (0 for none)}.
// Any other reply is an error matching acquire.ErrBadReply, and grants
// nothing.
func readClaim(r node.Reply) (claimReply, error) {
	switch len(r) {
	case 2:
		left, err := acquire.ReplyMs(r, 0)
		if err != nil {
			return claimReply{}, err
		}
		place, err := acquire.ReplyInt(r, 1, 0, math.MaxInt64)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{left: left, queued: place > 0}, nil
	case 1:
		token, err := acquire.ReplyToken(r, 0)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{granted: true, token: token}, nil
	}
	return claimReply{}, fmt.Errorf("%w: %d values, want 1 or 2", acquire.ErrBadReply, len(r))
}

// try runs the claim script once. On lease.ErrTaken, hint is how long
// until the lease in the way may end. A grant whose validity ran out
// before its reply arrived is released again and reported as an error
// matching lease.ErrExpired.
func (c *claim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, acquire.CtxErr(ctx, err)
	}
	lk := c.lk
	t1 := time.Now()
	script := claimScript
	if lk.unraised.Load() {
		script = claimUnraisedScript
	}
	r, err := lk.n.Eval(ctx, script, c.keys[:], c.args[:c.nargs]...)
	if err != nil {
		var re *node.ReplyError
		if !errors.As(err, &re) {
			// The claim may have landed with its reply lost, or may still
			// be on its way.
			c.abandon(ctx)
			return nil, 0, fmt.Errorf("rwlock: %s %q on %s: %w", c.what(), c.key, lk.n, acquire.CtxErr(ctx, err))
		}
		return nil, 0, &refusal{fmt.Errorf("rwlock: %s %q on %s: %w", c.what(), c.key, lk.n, acquire.CtxErr(ctx, err))}
	}
	cr, err := readClaim(r)
	if err != nil {
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("rwlock: %s %q on %s: %w", c.what(), c.key, lk.n, err)
	}
	if !cr.granted {
		c.queue = cr.queued
		return nil, cr.left, fmt.Errorf("rwlock: %s %q: %w", c.what(), c.key, lease.ErrTaken)
	}
	c.queue = false
	token := cr.token
	c.held = [3]string{c.args[0], c.args[1], token.String()}
	if err := ctx.Err(); err != nil {
		// Not every client cuts a call short when ctx ends; a caller that
		// gave up must not be left holding a lease it does not know of.
		c.releaseDetached(ctx)
		return nil, 0, fmt.Errorf("rwlock: %s %q on %s: %w", c.what(), c.key, lk.n, acquire.CtxErr(ctx, err))
	}
	until := t1.Add(c.ttl - acquire.Drift(c.ttl, lk.cfg.drift))
	if !time.Now().Before(until) {
		c.releaseDetached(ctx)
		return nil, 0, fmt.Errorf("rwlock: %s %q: %w: %w", c.what(), c.key, errLate, lease.ErrExpired)
	}
	return lease.New(c, lease.Grant{
		Key: c.key, Owner: c.args[0], Token: token, TTL: c.o.TTL, Until: until,
		Strategy: strategy, Observer: lk.cfg.observer, AutoRenew: c.o.AutoRenew, Metadata: c.o.Metadata,
	}), 0, nil
}

// abandon gives up the claim whether or not it landed, on a context
// detached from ctx: the caller's may have ended already.
func (c *claim) abandon(ctx context.Context) {
	keep := max(abandonKeep, 2*c.ttl).Milliseconds()
	acquire.Cleanup(ctx, c.lk.n, abandonScript, c.keys[:], c.args[0], strconv.FormatInt(keep, 10))
	c.queue = false
	c.drawOwner()
}

// leave gives up the claim's place in the queue, if it has one, on a
// context detached from ctx: the caller's may have ended already. A ticket
// whose leave is lost expires by its deadline.
func (c *claim) leave(ctx context.Context) {
	if !c.queue {
		return
	}
	acquire.Cleanup(ctx, c.lk.n, leaveScript, c.keys[:], c.args[0])
	c.queue = false
}

// releaseDetached releases a granted lease the caller must not keep, on a
// context detached from ctx: the caller's may have ended already.
func (c *claim) releaseDetached(ctx context.Context) {
	acquire.Cleanup(ctx, c.lk.n, releaseScript, c.keys[:], c.held[:]...)
	c.drawOwner() // as single's releaseDetached does, for the same reason
}

// Extend implements lease.Backend.
func (c *claim) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return time.Time{}, &lease.ArgError{Arg: "ttl", Value: ttl, Rule: "must be at least 1ms"}
	}
	ttl = time.Duration(ms) * time.Millisecond
	t1 := time.Now()
	_, err := c.lk.n.Eval(ctx, extendScript, c.keys[:], c.held[0], c.held[1], c.held[2],
		strconv.FormatInt(ms, 10), c.lk.keep(ttl))
	if err != nil {
		return time.Time{}, c.refused(ctx, "extend", l, err)
	}
	return t1.Add(ttl - acquire.Drift(ttl, c.lk.cfg.drift)), nil
}

// Release implements lease.Backend. The server refuses a reader's release
// run again after it succeeded (its reply lost, the client sent it again)
// as it refuses one of a reader whose lease ended and was dropped; while
// l is still valid by the local clock, the server's lease cannot have
// ended, so the refusal, with the counter still at l's token, is of the
// release run again, and the release succeeded.
func (c *claim) Release(ctx context.Context, l *lease.Lease) error {
	r, err := c.lk.n.Eval(ctx, releaseScript, c.keys[:], c.held[:]...)
	if err != nil {
		if h, ok := acquire.StaleCounter(err); ok && c.kind == reader && h == l.Token() && l.TTL() > 0 {
			return nil
		}
		return c.refused(ctx, "release", l, err)
	}
	if r.Int(0) != 1 {
		return fmt.Errorf("rwlock: release %q: %w: it had expired", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// refused maps a DLSTALE reply to an error matching lease.ErrNotHeld, and
// also fence.ErrStale when a writer has been granted the key since l's
// grant; other errors keep their context error recognisable.
func (c *claim) refused(ctx context.Context, op string, l *lease.Lease, err error) error {
	return acquire.Refused(ctx, "rwlock", fmt.Sprintf("%s %q", op, l.Key()), c.lk.n, l, err)
}
