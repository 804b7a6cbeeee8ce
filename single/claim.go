package single

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// the lease it was granted. Its key and argument slices are built once for
// all the server calls of the acquisition and the lease; the Lease
// serialises the Backend calls, and no attempt runs once it exists.
type claim struct {
	lk           *Locker
	key          string
	engine.Claim                 // Keys: the hash; Held: the owner, its token and the key's idle life in ms; NArgs: 3, or 4 to queue
	ids          strings.Builder // the hash key, owner and token, in one allocation
	// The claim script's arguments: owner, TTL ms, the hash's lifetime ms
	// and, for Acquire, the ticket's lifetime ms.
	args [4]string
	pos  int // the owner's place in the queue at the last refusal, 1 for its head
	// For a waiter: its ticket's lifetime, when its last claim was sent
	// (the ticket's deadline is that claim's server time plus the
	// lifetime), the key's attempts that claim's refusal replied, and the
	// token a release handed it, 0 for none (see heed).
	life   time.Duration
	sent   time.Time
	seen   fence.Token
	handed fence.Token
	// part says the claim is one key of a set taken key by key (see
	// setClaim.tryOrdered): its lease tells the Observer nothing, the
	// set's does.
	part bool
}

// errMigrating marks a claim refused because the lock's cluster slot is
// migrating; Acquire tries again.
var errMigrating = errors.New("single: cluster slot migrating")

func (lk *Locker) newClaim(key string, o settings.Call) *claim {
	c := &claim{lk: lk, key: key, Claim: engine.Claim{O: o, NArgs: 3}}
	c.TTL, c.args[1], c.args[2] = lk.kit.LeaseArgs(o.TTL)
	// The key, the owner and (setToken) the token are slices of one
	// buffer: strings the Builder returned stay valid as it grows.
	c.ids.Grow(len(key) + len("dlock:%{}") + 2*ownerBytes + 1 + len(o.Metadata) + maxTokenDigits)
	if strings.HasPrefix(key, "}") {
		c.ids.WriteString(hashKey(key)) // see hashKey
	} else {
		c.ids.WriteString("dlock:{")
		c.ids.WriteString(key)
		c.ids.WriteByte('}')
	}
	c.Keys[0] = c.ids.String()
	c.drawOwner()
	return c
}

// drawOwner gives the claim a new random owner: at first, and after its
// owner was abandoned, which claimScript refuses from then on.
func (c *claim) drawOwner() {
	var raw [ownerBytes]byte
	var hx [2 * ownerBytes]byte
	rand.Read(raw[:])
	hex.Encode(hx[:], raw[:])
	n := c.ids.Len()
	c.ids.Write(hx[:])
	if c.O.Metadata != "" { // see engine.OwnerValue
		c.ids.WriteByte(' ')
		c.ids.WriteString(c.O.Metadata)
	}
	c.args[0] = c.ids.String()[n:]
}

// ownerBytes is the size of an owner's random part: 128 bits from crypto/rand,
// unguessable on its own (the lease's owner is what releases it) and
// unique with overwhelming odds. (With the kernel's getrandom vDSO, the
// draw costs well under 1% of a lock+unlock's CPU.)
const ownerBytes = 16

// maxTokenDigits is the length of the largest token in decimal.
const maxTokenDigits = 20

// setToken records the granted token.
func (c *claim) setToken(t fence.Token) {
	n := c.ids.Len()
	var d [maxTokenDigits]byte
	c.ids.Write(strconv.AppendUint(d[:0], uint64(t), 10))
	c.Held = [3]string{c.args[0], c.ids.String()[n:], c.lk.kit.IdleMs}
}

// again is try for a blocking acquire (see againOf).
func (c *claim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	return againOf(c.try(ctx))
}

// againOf reads an attempt's outcome for a blocking acquire as
// engine.Classify does, and also stops at the server's refusal of part of
// the exchange (a WAIT the user may not run, say): the next attempt would
// meet the same refusal until ctx ends. Too few replicas and a slot in
// migration are worth another attempt.
func againOf(l *lease.Lease, hint time.Duration, err error) (*lease.Lease, time.Duration, error) {
	if err != nil && !errors.Is(err, errMigrating) && replyError(err) != nil {
		return nil, 0, err
	}
	return engine.Classify(l, hint, err)
}

// exchange runs a claim script, followed by WAIT when the Locker asks for
// replicas. It returns the script's reply, the server's error reply to
// the script itself (nothing was written), or lost when the exchange
// failed and the script may have run; and how many replicas acknowledged.
func (lk *Locker) exchange(ctx context.Context, s *node.Script, keys, args []string) (r node.Reply, acked int, err, lost error) {
	if lk.cfg.Replicas > 0 {
		var res []node.Result
		res, acked, lost = lk.n.Pipeline(ctx, []node.Call{{Script: s, Keys: keys, Args: args}},
			node.Wait{Replicas: lk.cfg.Replicas, Timeout: lk.cfg.ReplicaTimeout})
		if lost == nil {
			if len(res) != 1 {
				lost = fmt.Errorf("single: claim on %s: %d results for 1 call", lk.n, len(res))
			} else {
				r, err = res[0].Reply, res[0].Err
			}
		}
	} else {
		r, err = lk.n.Eval(ctx, s, keys, args...)
	}
	if err != nil && replyError(err) == nil {
		lost, err = err, nil
	}
	return r, acked, err, lost
}

// try runs the claim script once. On lease.ErrTaken, hint is how long the
// holder has left. A grant whose validity ran out before its reply arrived
// is released again and reported as an error matching lease.ErrExpired.
func (c *claim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	lk := c.lk
	t1 := time.Now()
	r, acked, err, lost := lk.exchange(ctx, claimScript, c.Keys[:], c.args[:c.NArgs])
	if lost != nil {
		// The claim may have landed with its reply lost, or may still be
		// on its way. That includes a pipeline whose WAIT failed, even
		// with an error reply: the claim before it ran all the same.
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, ctxerr.Wrap(ctx, lost))
	}
	if err != nil {
		if re := replyError(err); strings.Contains(re.Msg, "non local key") {
			// The lock's slot is migrating between cluster masters and
			// its hash is still on the source, which refuses the
			// script's look at :gone, a key it does not have. The script
			// had written nothing; once the keys have moved, a new
			// attempt runs on the destination.
			return nil, 0, fmt.Errorf("single: claim %q on %s: %w: %w", c.key, lk.n, errMigrating, err)
		}
		return nil, 0, &engine.Refusal{Err: fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, ctxerr.Wrap(ctx, err))}
	}
	cr, err := readClaim(r)
	if err != nil {
		c.abandon(ctx)
		return nil, 0, fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, err)
	}
	if !cr.granted {
		c.pos = cr.pos
		c.Queue = c.pos > 0
		c.sent, c.seen = t1, cr.attempts
		return nil, cr.left, lease.ErrTaken
	}
	c.Queue = false
	token := cr.token
	c.setToken(token)
	until, err := lk.granted(ctx, t1, c.TTL, "claim", c.key, c.key, acked)
	if err != nil {
		lk.kit.ReleaseDetached(ctx, c.Keys[:], c.Held[:])
		c.drawOwner()
		return nil, 0, err
	}
	return c.lease(token, until, false), 0, nil
}

// granted is engine.Kit.Granted for a claim that acked replicas
// acknowledged: a *ReplicaError for the lock on first when fewer than
// option.Replicas asks for, and ctx has not ended. The caller releases the
// grant on an error.
func (lk *Locker) granted(ctx context.Context, t1 time.Time, ttl time.Duration, op, key, first string, acked int) (time.Time, error) {
	if acked < lk.cfg.Replicas && ctx.Err() == nil {
		return time.Time{}, &ReplicaError{Key: first, Acked: acked, Wanted: lk.cfg.Replicas}
	}
	return lk.kit.Granted(ctx, t1, ttl, op, key)
}

// acquire makes the claim's one attempt, or with wait its attempts until
// one grants, queued and woken by releases (Acquire).
func (c *claim) acquire(ctx context.Context, wait bool) (*lease.Lease, error) {
	if !wait {
		l, _, err := c.try(ctx)
		return l, err
	}
	life := engine.TicketLife(c.O.Retry)
	c.life = time.Duration(life.Milliseconds()) * time.Millisecond
	c.args[3] = strconv.FormatInt(life.Milliseconds(), 10)
	c.NArgs = 4
	return c.lk.kit.Wait(ctx, c.O.Retry, life, c.Keys[0]+":released", engine.Waiter{
		Try: c.again, Heed: c.heed, Leave: c.leave,
		Handed: func() *lease.Lease {
			if c.handed == 0 {
				return nil
			}
			return c.takeHanded()
		},
	})
}

// claimReply is what claim.lua answered: a grant of token, or a refusal
// with how long the holder has left, the claim's place in the queue (0
// for none) and the key's attempts.
type claimReply struct {
	granted  bool
	token    fence.Token
	left     time.Duration
	pos      int
	attempts fence.Token
}

// readClaim reads the reply of claim.lua: the token of a grant, alone, or
// a refusal's {left ms, place, attempts}, or {left ms, place} from a claim
// without a ticket, whose attempts are read as engine.MaxToken: no token
// a release hands over is above them (see heed).
// Any other reply is an error matching engine.ErrBadReply, and grants
// nothing.
func readClaim(r node.Reply) (claimReply, error) {
	if len(r) == 1 {
		token, err := engine.ReplyToken(r, 0)
		return claimReply{granted: err == nil, token: token}, err
	}
	if len(r) != 2 {
		if err := engine.ReplyLen(r, 3); err != nil {
			return claimReply{}, err
		}
	}
	left, pos, err := engine.ReplyRefusal(r)
	if err != nil {
		return claimReply{}, err
	}
	cr := claimReply{left: left, pos: pos, attempts: engine.MaxToken}
	if len(r) == 3 {
		n, err := engine.ReplyInt(r, 2, 0, engine.MaxToken)
		if err != nil {
			return claimReply{}, err
		}
		cr.attempts = fence.Token(n)
	}
	return cr, nil
}

func (c *claim) lease(token fence.Token, until time.Time, short bool) *lease.Lease {
	rep := c.lk.cfg.Reporter
	if c.part {
		rep = nil
	}
	return engine.NewLease(c, leasing.Grant{
		Key: c.key, Owner: c.args[0], Token: token, TTL: c.O.TTL, Until: until,
		Strategy: strategy, Reporter: rep, AutoRenew: c.O.AutoRenew,
		Metadata: c.O.Metadata, Short: short,
	})
}

// heed reads a message of the release channel for a waiter (see
// handoff.lua) and says whether it calls for an attempt now: an empty one
// (the lock came free), or one that hands the lock to this waiter, whose
// token it keeps for the attempt when it is above the attempts of the
// waiter's latest refusal. A lower one is a grant made before that
// refusal ran, heard late: its lease has ended, and the attempt asks the
// server. A grant to another waiter does not call for an attempt: the
// lock is held again, and this waiter one place nearer the head.
func (c *claim) heed(msg string) bool {
	if msg == "" {
		return true
	}
	owner, token, ok := strings.Cut(msg, " ")
	if !ok || owner != c.args[0][:min(len(c.args[0]), 2*ownerBytes)] {
		return !ok
	}
	// A token no script grants hands nothing over: the attempt that
	// follows asks the server.
	t, err := strconv.ParseUint(token, 10, 64)
	if err == nil && t <= engine.MaxToken && fence.Token(t) > c.seen {
		c.handed = fence.Token(t)
	}
	return true
}

// takeHanded returns the lease a release handed to this waiter, without a
// call to the server, or nil when too little of it is left to be worth it
// (the waiter was slow to hear): a claim then finds the lock its own and
// runs it a TTL from then (see claim.lua). The server's lease ends at the
// TTL or at the ticket's deadline, whichever comes first, counted from
// the handoff, which ran after the waiter's last claim (its token is above
// the attempts that claim's refusal read; see heed), so after that claim
// was sent; the same span from the sending is thus safe to count on here. The lease is Short: it is extended to a
// TTL at once, in the background. Under option.Replicas nothing is taken: the
// release that wrote the handoff was not waited on, so the waiter's claim,
// which finds the lock its own, runs and is waited on as any claim is.
func (c *claim) takeHanded() *lease.Lease {
	token := c.handed
	c.handed = 0
	if c.lk.cfg.Replicas > 0 {
		return nil
	}
	span := min(c.TTL, c.life)
	until := c.lk.cfg.Until(c.sent, span)
	if time.Until(until) < span/2 {
		return nil
	}
	c.Queue = false
	c.setToken(token)
	return c.lease(token, until, true)
}

// replyError returns the *node.ReplyError in err's chain, or nil. A
// function of its own, so the variable errors.As needs is allocated only
// when there is an error to look at.
func replyError(err error) *node.ReplyError {
	var re *node.ReplyError
	if errors.As(err, &re) {
		return re
	}
	return nil
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

// Release releases the lease on the server, for lease.Lease.Release.
func (c *claim) Release(ctx context.Context, l *lease.Lease) error {
	return c.lk.kit.Release(ctx, c.Keys[:], c.Held[:], l, nil)
}
