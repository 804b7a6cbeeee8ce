package permits

import (
	"context"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TryAcquire makes one attempt at one of name's n permits. It returns an
// error matching lease.ErrTaken when n permits of name are live, or when
// waiters queue for them (a newcomer does not overtake them), and an
// *lease.ArgError for an empty name, an n outside [1, MaxPermits] or a
// bad option. When ctx ends during the attempt, or the exchange with the
// server fails, a claim that may have landed is given up before it
// returns, on a context of its own bounded by lease.ReleaseTimeout.
func (s *Semaphore) TryAcquire(ctx context.Context, name string, n int, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(s.cfg.Observer, strategy, name).End(s.tryAcquire(ctx, name, n, opts))
}

func (s *Semaphore) tryAcquire(ctx context.Context, name string, n int, opts []option.Option) (*lease.Lease, error) {
	o, err := s.check(ctx, name, n, opts)
	if err != nil {
		return nil, err
	}
	l, _, err := s.newClaim(name, n, o).try(ctx)
	return l, err
}

// Acquire waits until it is granted one of name's n permits or ctx ends.
// Waiters are served first come, first served: a call that finds no
// permit for it joins name's queue on the server, and a free permit goes
// to the queue's head as long as fewer than the head's own n are live. A
// waiter is handed its permit by the release that frees it: from the
// release's reply when the releaser is this Semaphore, else by the
// release's message; else it tries again when the first live permit runs
// out, or after a delay from the retry policy (Retry.Max once it hears
// the name's grants; from Retry.Min up when it cannot). A failed
// attempt is retried whatever its cause (a lost connection, a timeout),
// once a claim it may have left on the server is given up; only the
// server's error reply to the claim itself ends the wait at once. When ctx
// ends first, the error matches ctx.Err() and the last attempt's error,
// and no claim or place in the queue of this call is left on the server;
// that cleanup can take up to lease.ReleaseTimeout after ctx ended. A
// waiter that dies without giving up its place holds the queue up, once
// it reaches the head, for at most its ticket's lifetime: max(2 s, 3 ×
// its Retry.Max) after its last attempt.
func (s *Semaphore) Acquire(ctx context.Context, name string, n int, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(s.cfg.Observer, strategy, name).End(s.acquire(ctx, name, n, opts))
}

func (s *Semaphore) acquire(ctx context.Context, name string, n int, opts []option.Option) (*lease.Lease, error) {
	o, err := s.check(ctx, name, n, opts)
	if err != nil {
		return nil, err
	}
	c := s.newClaim(name, n, o)
	life := engine.TicketLife(o.Retry)
	c.life = time.Duration(life.Milliseconds()) * time.Millisecond
	c.args[4] = strconv.FormatInt(life.Milliseconds(), 10)
	c.args[5] = s.id
	c.NArgs = 6
	// A waiter is handed its grant by the release that makes it: by the
	// release's reply when the releaser is this Semaphore (see
	// router.hand), else by the message it publishes. Where the name's
	// channel is subscribed already (other waiters here), the waiter
	// enters the route before its claim; else, as most acquires are
	// granted at once, it enters and subscribes only when refused, and
	// then makes its next attempt at once: a grant made between the two
	// reaches nobody, and that attempt finds it.
	channel := c.Keys[0] + ":released"
	in := s.route.enterListening(channel, c.args[0])
	heard := in != nil
	l, hint, err := c.again(ctx)
	if err != nil && engine.Again(err) && ctx.Err() == nil {
		if in == nil {
			in = s.route.enter(channel, c.args[0])
		}
		defer s.route.leave(in)
	} else if in != nil {
		s.route.leave(in)
	}
	switch {
	case err == nil:
		return l, nil
	case !engine.Again(err):
		c.leave(ctx)
		return nil, err
	case ctx.Err() != nil:
		c.leave(ctx)
		return nil, engine.GaveUp(ctx, err)
	}
	subscribed := heard || s.route.listen(ctx, in, life) != nil
	// Subscribed, every grant to this waiter comes as a message or a
	// hand-over, or at its own claim once the first live permit has
	// ended (the hint cuts the delay to that), so the attempts between
	// only keep its ticket fresh and cover a lost message: they run at
	// Retry.Max, not from Retry.Min up. Without a subscription (it
	// failed, or hung past half the ticket), the wait polls at the pace
	// of o.Retry, and hears of this Semaphore's hand-overs only.
	wake := in.c
	r := o.Retry
	if subscribed {
		r.Min = r.Max
	}
	l, err = engine.Wait(ctx, r, func(ctx context.Context) (*lease.Lease, engine.Turn, error) {
		if heard {
			// The refusal above is this turn's: it was made while listening.
			heard = false
			return nil, engine.Turn{Hint: hint, Wake: wake, Heed: c.heed}, err
		}
		if c.handed != 0 {
			if l := c.takeHanded(); l != nil {
				return l, engine.Turn{}, nil
			}
		}
		s.route.rename(in, c.args[0]) // before the claim: its grant may come at once
		l, hint, err := c.again(ctx)
		return l, engine.Turn{Hint: hint, Wake: wake, Heed: c.heed}, err
	})
	if err != nil {
		c.leave(ctx)
	}
	return l, err
}
