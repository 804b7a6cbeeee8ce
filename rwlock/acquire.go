package rwlock

import (
	"context"
	"strconv"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TryAcquire makes one attempt at the write lock on key. It returns an
// error matching lease.ErrTaken when a writer or a reader holds the lock,
// or anyone waits for it (a newcomer does not overtake waiters), and an
// *lease.ArgError for an empty key or a bad option. When ctx ends during
// the attempt, or the exchange with the server fails, a claim that may
// have landed is given up before it returns, on a context of its own
// bounded by lease.ReleaseTimeout: against a hung server the call can
// return up to that long after ctx ended.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.try(ctx, key, writer, opts))
}

// TryAcquireShared makes one attempt at a read lease on key. It returns an
// error matching lease.ErrTaken when a writer holds the lock or waits for
// it, and otherwise behaves as TryAcquire.
func (lk *Locker) TryAcquireShared(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.try(ctx, key, reader, opts))
}

// Acquire waits until it holds the write lock on key, or ctx ends. It is
// granted once no lease on key is live, neither a writer's nor a
// reader's, and every waiter that queued before it has been served or has
// given up (see the package doc). A failed attempt is retried whatever its
// cause (a lost connection, a timeout), once a claim it may have left on
// the server is given up; only the server's error reply to the claim
// itself ends the wait at once. When ctx ends first, the error matches
// ctx.Err() and the last attempt's error, and no lease or place in the
// queue of this call is left on the server; that cleanup can take up to
// lease.ReleaseTimeout after ctx ended. A waiter that dies without giving
// up its place holds the others up for at most its ticket's lifetime:
// max(2 s, 3 × its Retry.Max) after its last attempt.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.wait(ctx, key, writer, opts))
}

// AcquireShared waits until it holds a read lease on key, or ctx ends. It
// is granted once no writer's lease on key is live and no writer that
// queued before it still waits; readers share the lock. Failures, ctx's
// end and dead waiters are as for Acquire.
func (lk *Locker) AcquireShared(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.wait(ctx, key, reader, opts))
}

func (lk *Locker) try(ctx context.Context, key string, k kind, opts []option.Option) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	l, _, err := lk.newClaim(key, k, o).try(ctx)
	return l, err
}

func (lk *Locker) wait(ctx context.Context, key string, k kind, opts []option.Option) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	c := lk.newClaim(key, k, o)
	life := engine.TicketLife(o.Retry)
	c.args[4] = strconv.FormatInt(life.Milliseconds(), 10)
	c.NArgs = 5
	return lk.kit.Wait(ctx, o.Retry, life, c.Keys[0]+":released", engine.Waiter{Try: c.again, Leave: c.leave})
}
