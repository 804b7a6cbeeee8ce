package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

// Attempt is one try at a lock. When the lock is refused, turn tells Wait
// what to wait for before the next one.
type Attempt func(ctx context.Context) (l *lease.Lease, turn Turn, err error)

// Turn is what a refused attempt learned of when to try again.
type Turn struct {
	// Hint is how long the lock stays held by its owner, as far as the
	// attempt could tell (0: unknown); it cuts the retry delay short.
	Hint time.Duration
	// Wake carries the messages of the lock's releases; nil waits for the
	// delay alone.
	Wake <-chan string
	// Heed, when set, reads each message on Wake and says whether it calls
	// for the next attempt now; the wait goes on through the others. When
	// nil, every message does, but as Ahead says.
	Heed func(msg string) bool
	// Ahead is how many waiters the queue serves before this one: each is
	// served on a release, so Wait lets all but the last of their signals
	// pass without asking the servers, and asks one early, which absorbs
	// a signal lost or coalesced. A count gone wrong (a dead waiter's
	// ticket dropped, signals lost) costs at most one retry delay.
	Ahead int
}

// Wait calls attempt until it returns a lease, an error that neither matches
// ErrTaken nor was marked with Retryable, or ctx ends. Between attempts it
// sleeps a delay from r, cut short by the turn's hint and by a signal on its
// wake channel. When ctx ends first, the error matches ctx's error with
// errors.Is, and also the last whole attempt's error: an attempt that ctx
// cut short (one that failed, without ErrTaken, after ctx ended) says less
// about the lock than the one before it, so the one before is reported.
func Wait(ctx context.Context, r settings.Pace, attempt Attempt) (*lease.Lease, error) {
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
		l, turn, err := attempt(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil && prev != nil && !errors.Is(err, lease.ErrTaken) {
			return nil, GaveUp(ctx, prev)
		}
		prev = err
		if !Again(err) {
			return nil, err
		}
		d := r.Delay(n)
		if turn.Hint > 0 && turn.Hint < d {
			d = turn.Hint
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		// The timer runs on through the signals let pass.
		for skip := max(0, turn.Ahead-1); ; skip-- {
			select {
			case <-ctx.Done():
				return nil, GaveUp(ctx, err)
			case <-timer.C:
			case msg := <-turn.Wake:
				if turn.Heed != nil && !turn.Heed(msg) || turn.Heed == nil && skip > 0 {
					continue
				}
			}
			break
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

// Again reports whether Wait tries again after an attempt that failed with
// err: it matches ErrTaken or was marked with Retryable.
func Again(err error) bool {
	var r retryable
	return errors.Is(err, lease.ErrTaken) || errors.As(err, &r)
}

// Retryable marks err as worth another attempt by Wait (a quorum that fell
// short because nodes were down, say) without making it match ErrTaken.
func Retryable(err error) error { return retryable{err} }

type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// maxTicketLife bounds TicketLife: ten years.
const maxTicketLife = 10 * 365 * 24 * time.Hour

// TicketLife is how long a waiter's place in a strategy's first-come,
// first-served queue lasts past its latest attempt. A live waiter attempts
// again within r.Max (sooner when woken), so three of those leave room for
// a slow round trip and a busy scheduler; the 2 s floor keeps short retries
// from dropping a waiter that is merely late. It bounds how long a waiter
// that died holds up a free lock.
//
// It is at most maxTicketLife, which keeps its ms exact in the scripts'
// doubles.
func TicketLife(r settings.Pace) time.Duration {
	if r.Max > maxTicketLife/3 {
		// 3 × Max past the largest Duration wrapped: a waiter lost its
		// place after the floor, or after any time at all.
		return maxTicketLife
	}
	return max(2*time.Second, 3*r.Max)
}
