package acquire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/lease"
)

// Attempt is one try at a lock. On ErrTaken, hint is how long the lock is
// still held by its owner, as far as the attempt could tell (0: unknown).
type Attempt func(ctx context.Context) (l *lease.Lease, hint time.Duration, err error)

// Wait calls attempt until it returns a lease, an error that neither matches
// ErrTaken nor was marked with Retryable, or ctx ends. Between attempts it
// sleeps a delay from r, cut short by hint and by a signal on wake (which
// may be nil). When ctx ends first, the error matches ctx's error with
// errors.Is, and also the last whole attempt's error: an attempt that ctx
// cut short (one that failed, without ErrTaken, after ctx ended) says less
// about the lock than the one before it, so the one before is reported.
func Wait(ctx context.Context, r lease.Retry, wake <-chan struct{}, attempt Attempt) (*lease.Lease, error) {
	var (
		timer *time.Timer
		prev  error
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 0; ; n++ {
		l, hint, err := attempt(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil && prev != nil && !errors.Is(err, lease.ErrTaken) {
			return nil, GaveUp(ctx, prev)
		}
		prev = err
		var again retryable
		if !errors.Is(err, lease.ErrTaken) && !errors.As(err, &again) {
			return nil, err
		}
		d := r.Delay(n)
		if hint > 0 && hint < d {
			d = hint
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return nil, GaveUp(ctx, err)
		case <-wake:
		case <-timer.C:
		}
	}
}

// GaveUp is the error of a wait that ctx ended. It matches ctx.Err(), the
// context's cause when it was cancelled with one, and last, the last
// attempt's error (so errors.Is(err, lease.ErrTaken) tells a wait that ran out on
// a held lock, and errors.As finds a strategy's typed error).
func GaveUp(ctx context.Context, last error) error {
	if c := context.Cause(ctx); c != nil && c != ctx.Err() {
		return fmt.Errorf("dlock: gave up waiting: %w: %w (last attempt: %w)", ctx.Err(), c, last)
	}
	return fmt.Errorf("dlock: gave up waiting: %w (last attempt: %w)", ctx.Err(), last)
}

// Retryable marks err as worth another attempt by Wait (a quorum that fell
// short because nodes were down, say) without making it match ErrTaken.
func Retryable(err error) error { return retryable{err} }

type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// TicketLife is how long a waiter's place in a strategy's first-come,
// first-served queue lasts past its latest attempt. A live waiter attempts
// again within r.Max (sooner when woken), so three of those leave room for
// a slow round trip and a busy scheduler; the 2 s floor keeps short retries
// from dropping a waiter that is merely late. It bounds how long a waiter
// that died holds up a free lock.
func TicketLife(r lease.Retry) time.Duration {
	if r == (lease.Retry{}) {
		r = lease.DefaultRetry
	}
	return max(2*time.Second, 3*r.Max)
}

// CtxErr keeps ctx's end recognisable by errors.Is when a client reported
// it as an error of its own (see ctxerr.Wrap).
func CtxErr(ctx context.Context, err error) error { return ctxerr.Wrap(ctx, err) }
