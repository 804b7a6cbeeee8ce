package single

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// ForceRelease is an operator's break: it ends whatever lease holds the
// lock on key, in one script (lua/force.lua), and raises the key's token
// as a claim would, so that the break's token, Broken.Token, is above
// every token handed out for the key, the old holder's included. The lock
// is then free, as after a release: handed to its first waiter, or left
// free, and the waiters are told. The old holder's next extend or release
// fails with an error matching lease.ErrNotHeld and fence.ErrStale, and
// its auto-renewal ends the lease with lease.ErrLost. A key nobody holds
// gets a new token all the same (Broken.Held is false). The Locker's
// Observer hears a observe.ForceReleased event.
func (lk *Locker) ForceRelease(ctx context.Context, key string) (lease.Broken, error) {
	return engine.Forced(ctx, lk.cfg.Observer, strategy, key, lk.forceRelease)
}

// breakKeepMs is how long, in ms, the server remembers a break, so that
// the break sent again within it runs once: engine.AbandonKeep, the span
// over which a late or re-sent call is guarded against elsewhere.
var breakKeepMs = strconv.FormatInt(engine.AbandonKeep.Milliseconds(), 10)

func (lk *Locker) forceRelease(ctx context.Context, key string) (lease.Broken, error) {
	// The break's id makes it run once: a client that sends it again
	// after its reply was lost gets the first run's reply (see force.lua).
	r, err := lk.n.Eval(ctx, forceScript, []string{hashKey(key)}, lk.kit.IdleMs, engine.NewOwner(), breakKeepMs)
	if err != nil {
		return lease.Broken{}, fmt.Errorf("single: force release %q on %s: %w", key, lk.n, ctxerr.Wrap(ctx, err))
	}
	was, err1 := strconv.ParseUint(r.Str(1), 10, 64)
	tok, err2 := strconv.ParseUint(r.Str(2), 10, 64)
	if len(r) != 4 || err1 != nil || err2 != nil || tok == 0 {
		// Tokens are secrets of a kind: the error quotes none.
		return lease.Broken{}, fmt.Errorf("single: force release %q on %s: %w", key, lk.n, engine.ErrBadReply)
	}
	b := lease.Broken{Key: key, Was: fence.Token(was), Token: fence.Token(tok)}
	if r.Str(0) != "" && r.Int(3) > 0 {
		b.Held, b.Owner = true, r.Str(0)
		b.Metadata = engine.Metadata(b.Owner)
	}
	return b, nil
}

// Resume takes up the lease a handle names (the text of a lease.Handle,
// see lease.Lease.Handle) written out by a Locker on the same server,
// perhaps in another process: it checks on the server that the handle's
// owner still holds the lock with the handle's token, and returns a lease
// that extends and releases it as the one written out did, valid for what
// the server says it has left (less the drift margin: more than a TTL when
// the server's clock stepped back since the grant, until an Extend
// restarts it at a TTL). opts may set option.AutoRenew (off by default)
// and option.TTL, the TTL renewals ask for (by default the handle's). A
// handle that is not one, cut short or edited, is an *lease.ArgError
// naming handle; one of another strategy or server is refused with an
// error matching lease.ErrForeignHandle; one whose lease has ended, with
// an error matching lease.ErrNotHeld.
func (lk *Locker) Resume(ctx context.Context, handle string, opts ...option.Option) (*lease.Lease, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	h, err := lease.ParseHandle(handle)
	if err != nil {
		return nil, err
	}
	if err := engine.HandleFor(h, strategy, lk.n.String()); err != nil {
		return nil, err
	}
	o, err := lk.options(ctx, h.Key, h.TTL, opts)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	info, err := lk.Inspect(ctx, h.Key)
	if err != nil {
		return nil, fmt.Errorf("single: resume: %w", err)
	}
	if !info.Held || info.Owner != h.Owner || info.Token != h.Token {
		return nil, fmt.Errorf("single: resume %q on %s: %w: the server holds it for another lease, or for none", h.Key, lk.n, lease.ErrNotHeld)
	}
	until := lk.cfg.Until(t1, info.TTL)
	if !time.Now().Before(until) {
		return nil, fmt.Errorf("single: resume %q on %s: %w: too little of it is left", h.Key, lk.n, lease.ErrNotHeld)
	}
	o.Metadata = engine.Metadata(h.Owner)
	c := lk.newClaim(h.Key, o)
	c.args[0] = h.Owner
	c.setToken(h.Token)
	return c.lease(h.Token, until, false), nil
}

// Handle writes the lease out (lease.Lease.Handle).
func (c *claim) Handle(l *lease.Lease) (lease.Handle, error) {
	return lease.Handle{Strategy: strategy, Servers: c.lk.n.String(), Key: c.key,
		Owner: c.args[0], Token: l.Token(), TTL: c.O.TTL}, nil
}
