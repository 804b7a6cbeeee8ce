package permits

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// claim is one acquisition: its attempts, and then the backend of
// the permit it was granted. The Lease serialises the Backend calls, and
// no attempt runs once it exists.
type claim struct {
	engine.Claim // Keys: the name's hash; Held: owner, token, slot; NArgs: 4, or 6 to queue
	s            *Semaphore
	name         string
	// The claim script's arguments: owner, N, TTL ms, the hash's lifetime
	// ms and, for Acquire, the ticket's lifetime ms and the Semaphore's ID.
	args [6]string
	key  string // once granted: the lease's key, NAME#SLOT
	// For a waiter: its ticket's lifetime, when its last claim was sent
	// (the ticket's deadline is that claim's server time plus the
	// lifetime), the attempts that claim's refusal replied, and the permit
	// a release handed it, token 0 for none, whole when a release of this
	// Semaphore handed it (see heed and takeHanded).
	life        time.Duration
	sent        time.Time
	seen        fence.Token
	handed      fence.Token
	handedSlot  int
	handedWhole bool
}

func (s *Semaphore) newClaim(name string, n int, o settings.Call) *claim {
	c := &claim{s: s, name: name, Claim: engine.Claim{O: o, NArgs: 4, Keys: [1]string{hashKey(name)}}}
	c.args[1] = strconv.Itoa(n)
	c.TTL, c.args[2], c.args[3] = s.kit.LeaseArgs(o.TTL)
	c.drawOwner()
	return c
}

// drawOwner gives the claim a new random owner: at first, and after its
// owner was abandoned, which the claim script refuses from then on.
func (c *claim) drawOwner() {
	c.args[0] = engine.OwnerValue(engine.NewOwner(), c.O.Metadata)
}

// again is try for a blocking acquire (see engine.Classify).
func (c *claim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	return engine.Classify(c.try(ctx))
}

// try runs the claim script once. On lease.ErrTaken, hint is how long
// until the first live permit ends. A grant whose validity ran out before
// its reply arrived is released again and reported as an error matching
// lease.ErrExpired.
func (c *claim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	s := c.s
	t1 := time.Now()
	r, lost, err := s.kit.Run(ctx, scripts.Claim, c.Keys[:], c.args[:c.NArgs], "claim", c.name)
	if err != nil {
		if lost {
			c.abandon(ctx)
		}
		return nil, 0, err
	}
	cr, err := readClaim(r)
	if err != nil {
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("permits: claim %q on %s: %w", c.name, s.n, err)
	}
	if !cr.granted {
		c.Queue = cr.queued
		c.sent, c.seen = t1, cr.attempts
		return nil, cr.left,
			fmt.Errorf("permits: %q: %w: all %s permits held, or waited for", c.name, lease.ErrTaken, c.args[1])
	}
	c.Queue = false
	token, slot := cr.token, cr.slot
	c.setHeld(token, slot)
	until, err := s.kit.Granted(ctx, t1, c.TTL, "claim", c.name)
	if err != nil {
		// Released, and the claim goes on under a new owner (see
		// engine.Kit.ReleaseDetached).
		s.kit.ReleaseDetached(ctx, c.Keys[:], c.Held[:])
		c.drawOwner()
		return nil, 0, err
	}
	return c.lease(token, until, false), 0, nil
}

// claimReply is what claim.lua answered: a grant of token and slot, or a
// refusal with how long until the first live permit ends, whether the
// claim waits in the queue, and the name's attempts.
type claimReply struct {
	granted  bool
	token    fence.Token
	slot     int
	left     time.Duration
	queued   bool
	attempts fence.Token
}

// readClaim reads the reply of claim.lua: a grant's {token, slot}, or a
// refusal's {left ms, place in the queue (0 for none), attempts}.
// Any other reply is an error matching engine.ErrBadReply, and grants
// nothing.
func readClaim(r node.Reply) (claimReply, error) {
	switch len(r) {
	case 3:
		left, place, err := engine.ReplyRefusal(r)
		if err != nil {
			return claimReply{}, err
		}
		attempts, err := engine.ReplyInt(r, 2, 0, engine.MaxToken)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{left: left, queued: place > 0, attempts: fence.Token(attempts)}, nil
	case 2:
		token, err := engine.ReplyToken(r, 0)
		if err != nil {
			return claimReply{}, err
		}
		slot, err := engine.ReplyInt(r, 1, 0, math.MaxInt32)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{granted: true, token: token, slot: int(slot)}, nil
	}
	return claimReply{}, fmt.Errorf("%w: %d values, want 2 or 3", engine.ErrBadReply, len(r))
}

func (c *claim) setHeld(token fence.Token, slot int) {
	c.Held = [3]string{c.args[0], token.String(), strconv.Itoa(slot)}
	c.key = c.name + "#" + c.Held[2]
}

func (c *claim) lease(token fence.Token, until time.Time, short bool) *lease.Lease {
	return engine.NewLease(c, leasing.Grant{
		Key: c.key, Owner: c.args[0], Token: token, TTL: c.O.TTL, Until: until,
		Strategy: strategy, Reporter: c.s.cfg.Reporter, AutoRenew: c.O.AutoRenew, Metadata: c.O.Metadata, Short: short,
	})
}

// strategy names this package in the leases it grants.
const strategy = "permits"

// takeHanded returns the permit a release handed to this waiter, without
// a call to the server, or nil when too little of it is left to be worth
// it (the waiter was slow to hear): a claim then finds the permit its own
// and runs it a TTL from then. The server's permit ends at the TTL or at
// the ticket's deadline, whichever comes first, or at the TTL alone when
// a release of this Semaphore handed it over (whole), counted from the
// handoff, which ran after the waiter's last claim (its token is above
// the attempts that claim's refusal read; see heed), so after that claim
// was sent; the same span from the sending is thus safe to count on here. A lease short of a TTL is Short: it is
// extended to a TTL at once, in the background.
func (c *claim) takeHanded() *lease.Lease {
	token := c.handed
	c.handed = 0
	span := c.TTL
	if !c.handedWhole {
		span = min(c.TTL, c.life)
	}
	until := c.s.cfg.Until(c.sent, span)
	if time.Until(until) < span/2 {
		return nil
	}
	c.Queue = false
	c.setHeld(token, c.handedSlot)
	return c.lease(token, until, span < c.TTL)
}

// abandon gives up the claim whether or not it landed, on a context
// detached from ctx: the caller's may have ended already.
func (c *claim) abandon(ctx context.Context) {
	c.s.kit.Abandon(ctx, c.Keys[:], c.args[0], c.TTL, &c.Queue)
	c.drawOwner()
}

// leave gives up the claim's place in the queue, and a permit handed to
// it unheard, on a context detached from ctx: the caller's may have ended
// already. A ticket whose leave is lost expires by its deadline.
func (c *claim) leave(ctx context.Context) {
	if c.handed != 0 {
		c.Queue = true // the leave gives the permit back
	}
	c.s.kit.Leave(ctx, c.Keys[:], c.args[0], &c.Queue)
}

// Extend extends the lease on the server, for lease.Lease.Extend.
func (c *claim) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	return c.s.kit.Extend(ctx, c.Keys[:], c.Held[:], l, ttl)
}

// Release, for lease.Lease.Release. The server refuses a release run
// again after it succeeded (its reply lost, the client sent it again) as
// it refuses one of a permit that ended and was dropped; while l is still
// valid by the local clock, the server's permit cannot have ended, so the
// refusal is of the release run again, and the release succeeded. The
// grants the release made to waiters of this Semaphore come in its
// reply, not as messages, and are handed to them here (see router.hand).
func (c *claim) Release(ctx context.Context, l *lease.Lease) error {
	k := &c.s.kit
	r, err := k.Node.Eval(ctx, scripts.Release, c.Keys[:], c.Held[0], c.Held[1], c.Held[2], c.s.id)
	if err != nil {
		if _, stale := engine.StaleCounter(err); stale && l.TTL() > 0 {
			return nil
		}
		return k.Refused(ctx, "release", l, err)
	}
	for i := 1; i+2 < len(r); i += 3 {
		c.s.route.hand(c.Keys[0]+":released", r.Str(i), r.Str(i+1), r.Str(i+2))
	}
	if r.Int(0) != 1 {
		return fmt.Errorf("permits: release %q: %w: it had expired", l.Key(), lease.ErrNotHeld)
	}
	return nil
}
