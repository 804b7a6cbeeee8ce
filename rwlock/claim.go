package rwlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
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

// claim is one acquisition: its attempts, and then the backend of
// the lease it was granted. The Lease serialises the Backend calls, and
// no attempt runs once it exists.
type claim struct {
	lk           *Locker
	key          string
	kind         kind
	engine.Claim // Keys: the lock's hash; Held: owner, kind, token; NArgs: 4, or 5 to queue
	// The claim script's arguments: owner, kind, TTL ms, the hash's
	// lifetime ms and, for a blocking acquire, the ticket's lifetime ms.
	args [5]string
}

func (lk *Locker) newClaim(key string, k kind, o settings.Call) *claim {
	c := &claim{lk: lk, key: key, kind: k, Claim: engine.Claim{O: o, NArgs: 4, Keys: [1]string{KeyOf(key)}}}
	c.args[1] = string(k)
	c.TTL, c.args[2], c.args[3] = lk.kit.LeaseArgs(o.TTL)
	c.drawOwner()
	return c
}

// drawOwner gives the claim a new random owner: at first, and after its
// owner was abandoned, which the claim script refuses from then on.
func (c *claim) drawOwner() {
	c.args[0] = engine.OwnerValue(engine.NewOwner(), c.O.Metadata)
}

func (c *claim) what() string {
	if c.kind == writer {
		return "write lock"
	}
	return "read lease"
}

// again is try for a blocking acquire (see engine.Classify).
func (c *claim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	return engine.Classify(c.try(ctx))
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
// Any other reply is an error matching engine.ErrBadReply, and grants
// nothing.
func readClaim(r node.Reply) (claimReply, error) {
	switch len(r) {
	case 2:
		left, place, err := engine.ReplyRefusal(r)
		return claimReply{left: left, queued: place > 0}, err
	case 1:
		token, err := engine.ReplyToken(r, 0)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{granted: true, token: token}, nil
	}
	return claimReply{}, fmt.Errorf("%w: %d values, want 1 or 2", engine.ErrBadReply, len(r))
}

// try runs the claim script once. On lease.ErrTaken, hint is how long
// until the lease in the way may end. A grant whose validity ran out
// before its reply arrived is released again and reported as an error
// matching lease.ErrExpired.
func (c *claim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	lk := c.lk
	t1 := time.Now()
	r, lost, err := lk.kit.Run(ctx, scripts.Claim, c.Keys[:], c.args[:c.NArgs], c.what(), c.key)
	if err != nil {
		if lost {
			c.abandon(ctx)
		}
		return nil, 0, err
	}
	cr, err := readClaim(r)
	if err != nil {
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("rwlock: %s %q on %s: %w", c.what(), c.key, lk.n, err)
	}
	if !cr.granted {
		c.Queue = cr.queued
		return nil, cr.left, fmt.Errorf("rwlock: %s %q: %w", c.what(), c.key, lease.ErrTaken)
	}
	c.Queue = false
	token := cr.token
	c.Held = [3]string{c.args[0], c.args[1], token.String()}
	until, err := lk.kit.Granted(ctx, t1, c.TTL, c.what(), c.key)
	if err != nil {
		// Released, and the claim goes on under a new owner (see
		// engine.Kit.ReleaseDetached).
		lk.kit.ReleaseDetached(ctx, c.Keys[:], c.Held[:])
		c.drawOwner()
		return nil, 0, err
	}
	return engine.NewLease(c, leasing.Grant{
		Key: c.key, Owner: c.args[0], Token: token, TTL: c.O.TTL, Until: until,
		Strategy: strategy, Reporter: lk.cfg.Reporter, AutoRenew: c.O.AutoRenew, Metadata: c.O.Metadata,
	}), 0, nil
}

// abandon gives up the claim whether or not it landed, on a context
// detached from ctx: the caller's may have ended already.
func (c *claim) abandon(ctx context.Context) {
	c.lk.kit.Abandon(ctx, c.Keys[:], c.args[0], c.TTL, &c.Queue)
	c.drawOwner()
}

// leave gives up the claim's place in the queue, if it has one, on a
// context detached from ctx: the caller's may have ended already. A ticket
// whose leave is lost expires by its deadline.
func (c *claim) leave(ctx context.Context) {
	c.lk.kit.Leave(ctx, c.Keys[:], c.args[0], &c.Queue)
}

// Extend extends the lease on the server, for lease.Lease.Extend.
func (c *claim) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	return c.lk.kit.Extend(ctx, c.Keys[:], c.Held[:], l, ttl)
}

// Release, for lease.Lease.Release. The server refuses a reader's release
// run again after it succeeded (its reply lost, the client sent it again)
// as it refuses one of a reader whose lease ended and was dropped; while
// l is still valid by the local clock, the server's lease cannot have
// ended, so the refusal, with the counter still at l's token, is of the
// release run again, and the release succeeded.
func (c *claim) Release(ctx context.Context, l *lease.Lease) error {
	return c.lk.kit.Release(ctx, c.Keys[:], c.Held[:], l, func(err error) bool {
		h, ok := engine.StaleCounter(err)
		return ok && c.kind == reader && h == l.Token() && l.TTL() > 0
	})
}
