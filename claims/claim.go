package claims

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// Claim is one item held under a lease. Its lease ends by its TTL unless
// extended (Lease().Extend, or option.AutoRenew at the claim); its
// Complete and Retry end it. Its methods are safe for concurrent use.
type Claim struct {
	q       *Queue
	id      string
	token   fence.Token
	attempt int
	args    [3]string // id, owner, token, as the scripts get them
	l       *lease.Lease

	mu    sync.Mutex   // serialises Complete and Retry
	op    atomic.Int32 // what the lease's Release does: opRetry or opComplete
	ended int32        // the op that succeeded, 0 before; guarded by mu
}

const (
	opRetry int32 = iota + 1
	opComplete
)

// ID returns the item's id.
func (c *Claim) ID() string { return c.id }

// Token returns the claim's fencing token: it is larger than the token of
// every earlier claim of the item. Carry it into the writes the item's
// work makes, where a fence can refuse a worker that lost the item.
func (c *Claim) Token() fence.Token { return c.token }

// Attempt returns how many times the item has been claimed, this claim
// included: 1 the first time. Claims that were given up before their
// caller saw them (see Queue.Claim) count too.
func (c *Claim) Attempt() int { return c.attempt }

// Lease returns the claim's lease: its key is the item's id, its token
// Token's. Its Done channel and Context end when the lease does; Extend
// keeps it. Its Release returns the item to the queue, as Retry does.
func (c *Claim) Lease() *lease.Lease { return c.l }

// Complete removes the item from the queue for good, and ends the lease.
// It succeeds when this claim is the item's latest, even after its lease
// ran out, as long as no other worker has claimed the item since: nobody
// else can have held it. Otherwise it returns an error matching
// lease.ErrNotHeld, and also fence.ErrStale, with a *fence.StaleError
// carrying the newer token, when the item was claimed again since. A
// Complete that failed otherwise (a lost connection, a timeout) may have
// landed: call it again, which succeeds when it had, within the done
// record's lifetime (option.KeepDone). When ctx has already ended, it runs on
// a context of its own bounded by lease.ReleaseTimeout. After a Complete
// that succeeded, Complete returns nil again and Retry fails.
func (c *Claim) Complete(ctx context.Context) error { return c.finish(ctx, opComplete) }

// Retry returns the item to the back of the queue and ends the lease; the
// item's next claim carries a larger token. Its rules are Complete's: it
// succeeds for the item's latest claim (an item whose lease ran out, and
// that a claim returned to the queue already, stays where it is), and
// fails with an error matching lease.ErrNotHeld (and fence.ErrStale)
// otherwise. Releasing the lease does the same.
func (c *Claim) Retry(ctx context.Context) error { return c.finish(ctx, opRetry) }

func (c *Claim) finish(ctx context.Context, op int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == op {
		return nil
	}
	if c.ended != 0 {
		return fmt.Errorf("claims: %s %q: %w: %s already", opName(op), c.id, lease.ErrNotHeld, past(c.ended))
	}
	c.op.Store(op)
	err := c.l.Release(ctx)
	c.op.Store(opRetry)
	if err == nil {
		c.ended = op
	}
	return err
}

func opName(op int32) string {
	if op == opComplete {
		return "complete"
	}
	return "retry"
}

func past(op int32) string {
	if op == opComplete {
		return "completed"
	}
	return "returned to the queue"
}

// Claim takes the next pending item under a lease, in one script on the
// server: it returns to the queue claimed items whose lease ended (up to
// 16), takes the item at the front, raises its token and stamps the lease
// on the server's clock. When nothing is pending, it returns an error
// matching ErrEmpty. It returns an *lease.ArgError for a bad option. When
// ctx ends during the call, or the exchange with the server fails, a claim
// that may have landed is given up before Claim returns, its item put back
// at the front of the queue, on a context of its own bounded by
// lease.ReleaseTimeout.
func (q *Queue) Claim(ctx context.Context, opts ...option.Option) (*Claim, error) {
	return q.observed(ctx, q.claim, opts)
}

// observed runs claim, a claim of the queue, and reports it to the
// queue's Observer as an acquisition: a grant under the claimed item's
// id; an empty queue, an answer rather than a fault, as a lock found
// taken (nothing free to claim).
func (q *Queue) observed(ctx context.Context, claim func(context.Context, []option.Option) (*Claim, error), opts []option.Option) (*Claim, error) {
	ob := engine.Start(q.cfg.Observer, strategy, q.name)
	c, err := claim(ctx, opts)
	switch {
	case err == nil:
		ob.End(c.Lease(), nil)
	case errors.Is(err, ErrEmpty):
		ob.End(nil, fmt.Errorf("%w: %w", lease.ErrTaken, err))
	default:
		ob.End(nil, err)
	}
	return c, err
}

func (q *Queue) claim(ctx context.Context, opts []option.Option) (*Claim, error) {
	o, err := q.options(ctx, opts)
	if err != nil {
		return nil, err
	}
	c, _, err := q.newAttempt(o).try(ctx)
	return c, err
}

// ClaimWait is Claim that waits, until an item is claimed or ctx ends. It
// wakes when an item becomes pending (an Add, a Retry, an abandoned
// claim: each publishes on the queue's channel), else when the earliest
// lease in the queue ends or a delay from the retry policy (option.Retry)
// passes. A failed attempt is retried whatever its cause (a lost
// connection, a timeout), but for the server's error reply to the claim
// itself. When ctx ends first, the error matches ctx.Err() and the last
// attempt's error (ErrEmpty when nothing was pending).
func (q *Queue) ClaimWait(ctx context.Context, opts ...option.Option) (*Claim, error) {
	return q.observed(ctx, q.claimWait, opts)
}

func (q *Queue) claimWait(ctx context.Context, opts []option.Option) (*Claim, error) {
	o, err := q.options(ctx, opts)
	if err != nil {
		return nil, err
	}
	a := q.newAttempt(o)
	var (
		got        *Claim
		wake       <-chan string
		stop       = func() {}
		subscribed bool
	)
	once := func(ctx context.Context) (time.Duration, error) {
		c, hint, err := a.try(ctx)
		if err == nil {
			got = c
			return 0, nil
		}
		if r := (*engine.Refusal)(nil); errors.As(err, &r) {
			return 0, err
		}
		// Nothing pending, a lost exchange (the claim given up), a grant
		// too late to use: worth another attempt.
		return hint, engine.Retryable(err)
	}
	_, err = engine.Wait(ctx, o.Retry, func(ctx context.Context) (*lease.Lease, engine.Turn, error) {
		hint, err := once(ctx)
		if err != nil && engine.Again(err) && !subscribed && ctx.Err() == nil {
			subscribed = true
			// Subscribed, then one more attempt at once: an item added
			// between the first attempt and the subscription wakes
			// nobody. A subscription that hangs (the server went away
			// meanwhile) must not hold the wait up; without one, the
			// wait polls.
			wake, stop = q.kit.Subscribe(ctx, q.keys[0]+":ready", subscribeLife)
			hint, err = once(ctx)
		}
		if err != nil {
			return nil, engine.Turn{Hint: hint, Wake: wake}, err
		}
		return got.l, engine.Turn{}, nil
	})
	stop()
	if err != nil {
		return nil, err
	}
	return got, nil
}

// subscribeLife bounds ClaimWait's subscription to the ready channel:
// half of it, a second (see engine.Kit.Subscribe).
const subscribeLife = 2 * time.Second

// attempt is the claims of one Claim or ClaimWait call: their options and
// owner, drawn afresh after an abandon.
type attempt struct {
	q     *Queue
	o     settings.Call
	ttl   time.Duration // o.TTL in whole ms, as the server gets it
	ttlMs string
	owner string
}

func (q *Queue) newAttempt(o settings.Call) *attempt {
	a := &attempt{q: q, o: o}
	a.ttl, a.ttlMs, _ = q.kit.LeaseArgs(o.TTL)
	a.owner = engine.OwnerValue(engine.NewOwner(), o.Metadata)
	return a
}

// claimReply is what claim.lua answered: a grant of the item id with its
// token and attempt number; or no item, with how long until the earliest
// lease in the queue ends (0 when unknown); or a refusal of an owner given
// up (gone).
type claimReply struct {
	granted bool
	id      string
	token   fence.Token
	attempt int
	left    time.Duration
	gone    bool
}

// readClaim reads the reply of claim.lua: a grant's {id, token, attempt},
// or, alone, the ms until the earliest lease ends, -1 for an empty queue
// or -2 for an owner given up.
// Any other reply is an error matching engine.ErrBadReply, and hands
// out nothing.
func readClaim(r node.Reply) (claimReply, error) {
	switch len(r) {
	case 1:
		ms, err := engine.ReplyInt(r, 0, -2, math.MaxInt64)
		switch {
		case err != nil:
			return claimReply{}, err
		case ms == -2:
			return claimReply{gone: true}, nil
		case ms == -1:
			return claimReply{}, nil
		}
		left, err := engine.ReplyMs(r, 0)
		return claimReply{left: left}, err
	case 3:
		if r[0].Kind != node.Str || r[0].Str == "" || len(r[0].Str) > MaxID {
			return claimReply{}, fmt.Errorf("%w: value 0 of 3 is not an item id", engine.ErrBadReply)
		}
		token, err := engine.ReplyToken(r, 1)
		if err != nil {
			return claimReply{}, err
		}
		attempt, err := engine.ReplyInt(r, 2, 1, math.MaxInt32)
		if err != nil {
			return claimReply{}, err
		}
		return claimReply{granted: true, id: r[0].Str, token: token, attempt: int(attempt)}, nil
	}
	return claimReply{}, fmt.Errorf("%w: %d values, want 1 or 3", engine.ErrBadReply, len(r))
}

// try runs the claim script once. On ErrEmpty, hint is how long until the
// earliest lease in the queue ends, 0 when unknown.
func (a *attempt) try(ctx context.Context) (*Claim, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	q := a.q
	t1 := time.Now()
	r, lost, err := q.kit.Run(ctx, claimScript, q.keys[:], []string{a.owner, a.ttlMs}, "claim from", q.name)
	if err != nil {
		if lost {
			a.abandon(ctx)
		}
		return nil, 0, err
	}
	cr, err := readClaim(r)
	switch {
	case err != nil:
		// The script ran, and may have handed out an item: give it up.
		a.abandon(ctx)
		return nil, 0, fmt.Errorf("claims: claim from %q on %s: %w", q.name, q.n, err)
	case cr.gone:
		// Only an owner this attempt gave up is refused so, and it draws
		// another: not a reply this call can get.
		a.owner = engine.OwnerValue(engine.NewOwner(), a.o.Metadata)
		return nil, 0, fmt.Errorf("claims: claim from %q on %s: unexpected reply %v", q.name, q.n, r)
	case !cr.granted:
		return nil, cr.left, fmt.Errorf("claims: claim from %q: %w", q.name, ErrEmpty)
	}
	c := &Claim{q: q, id: cr.id, token: cr.token, attempt: cr.attempt}
	c.args = [3]string{c.id, a.owner, strconv.FormatUint(uint64(c.token), 10)}
	c.op.Store(opRetry)
	until, err := q.kit.Granted(ctx, t1, a.ttl, "claim from", q.name)
	if err != nil {
		// The item goes back to the queue with the abandon.
		a.abandon(ctx)
		return nil, 0, err
	}
	c.l = engine.NewLease((*backend)(c), leasing.Grant{
		Key: c.id, Owner: a.owner, Token: c.token, TTL: a.o.TTL, Until: until,
		Strategy: strategy, Reporter: q.cfg.Reporter, AutoRenew: a.o.AutoRenew, Metadata: a.o.Metadata,
	})
	return c, 0, nil
}

// abandon gives up a claim whether or not it landed, on a context detached
// from ctx (the caller's may have ended already), and draws a new owner:
// the abandoned one is refused from then on.
func (a *attempt) abandon(ctx context.Context) {
	a.q.kit.Abandon(ctx, a.q.keys[:], a.owner, a.ttl, nil)
	a.owner = engine.OwnerValue(engine.NewOwner(), a.o.Metadata)
}

// backend is a Claim's side of its lease: a type of its own, so that the
// backend methods stay out of Claim's API.
type backend Claim

// Extend extends the lease on the server, for lease.Lease.Extend.
func (b *backend) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	c := (*Claim)(b)
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return time.Time{}, &lease.ArgError{Arg: "ttl", Value: ttl, Rule: "must be at least 1ms"}
	}
	ttl = time.Duration(ms) * time.Millisecond
	t1 := time.Now()
	_, err := c.q.n.Eval(ctx, extendScript, c.q.keys[:], c.args[0], c.args[1], c.args[2], strconv.FormatInt(ms, 10))
	if err != nil {
		return time.Time{}, c.refused(ctx, "extend", err)
	}
	return c.q.cfg.Until(t1, ttl), nil
}

// Release, for lease.Lease.Release: it completes the item when Complete
// called it, and otherwise returns it to the queue.
func (b *backend) Release(ctx context.Context, l *lease.Lease) error {
	c := (*Claim)(b)
	var err error
	op := c.op.Load()
	if op == opComplete {
		_, err = c.q.n.Eval(ctx, completeScript, c.q.keys[:], c.args[0], c.args[1], c.args[2], c.q.keepMs, c.q.idleMs)
	} else {
		_, err = c.q.n.Eval(ctx, retryScript, c.q.keys[:], c.args[:]...)
	}
	if err != nil {
		return c.refused(ctx, opName(op), err)
	}
	return nil
}

// refused maps a DLSTALE reply to an error matching lease.ErrNotHeld, and
// also fence.ErrStale when the item has been claimed again since this
// claim; other errors keep their context error recognisable.
func (c *Claim) refused(ctx context.Context, op string, err error) error {
	h, ok := engine.StaleCounter(err)
	if !ok {
		return fmt.Errorf("claims: %s %q on %s: %w", op, c.id, c.q.n, ctxerr.Wrap(ctx, err))
	}
	switch {
	case h > c.token:
		return fmt.Errorf("claims: %s %q: %w: %w", op, c.id, lease.ErrNotHeld,
			&fence.StaleError{Resource: c.id, Token: c.token, Highest: h})
	case h == 0:
		return fmt.Errorf("claims: %s %q: %w: the item is not in the queue", op, c.id, lease.ErrNotHeld)
	}
	return fmt.Errorf("claims: %s %q: %w: its lease ran out", op, c.id, lease.ErrNotHeld)
}
