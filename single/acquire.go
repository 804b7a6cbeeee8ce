package single

import (
	"context"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TryAcquire makes one attempt at the lock on key. It returns an error
// matching lease.ErrTaken when another owner holds it, and an
// *lease.ArgError for a bad key or option. When ctx ends during the
// attempt, or the exchange with the server fails, a claim that may have
// landed is released before it returns, on a context of its own bounded
// by lease.ReleaseTimeout: against a hung server the call can return up
// to that long after ctx ended.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, false))
}

// Acquire waits until the lock on key is granted or ctx ends. Waiters
// are served first come, first served: a call that finds the lock taken
// joins the key's queue on the server, and a free lock goes to the
// queue's head (see claimScript). A waiter wakes when the holder's release
// is published, else when the holder's lease runs out or a delay from the
// retry policy passes. A failed attempt is retried whatever its cause (a
// lost connection, a timeout, a failed WAIT, too few replicas), once a
// claim it may have left on the server is given up; a claim given up that
// way also gives up its place in the queue. Only the server's error reply
// to the claim itself (the script refused, or the server would not run
// it) ends the wait at once. When ctx ends first, the error matches
// ctx.Err() and the last attempt's error, no claim of this call is left on
// the server, and its place in the queue is given up; as with TryAcquire,
// that cleanup can take up to lease.ReleaseTimeout after ctx ended. A
// waiter that dies without giving up its place holds the lock up, once it
// reaches the head, for at most its ticket's lifetime: max(2 s, 3 × its
// Retry.Max) after its last attempt.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, true))
}

// acquire is TryAcquire, or Acquire when wait is set.
func (lk *Locker) acquire(ctx context.Context, key string, opts []option.Option, wait bool) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, lk.cfg.TTL, opts)
	if err != nil {
		return nil, err
	}
	return lk.newClaim(key, o).acquire(ctx, wait)
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
