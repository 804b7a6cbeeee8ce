package engine

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

func TestWaitRetriesRetryable(t *testing.T) {
	down := errors.New("node down")
	n := 0
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, settings.Pace{Min: time.Millisecond, Max: time.Millisecond},
		func(context.Context) (*lease.Lease, Turn, error) { n++; return nil, Turn{}, Retryable(down) })
	if n < 2 {
		t.Errorf("attempts = %d; want a retry", n)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, down) {
		t.Errorf("err = %v; want it to match the deadline and the last attempt's error", err)
	}
	if errors.Is(err, lease.ErrTaken) {
		t.Errorf("err = %v matches ErrTaken; a retryable failure is not a taken lock", err)
	}
}

// TicketLife saturates where 3 × Max overflowed: a negative life (2 s
// floor) or a wrapped one dropped a waiter that retries slowly.
func TestTicketLifeNoOverflow(t *testing.T) {
	for _, tc := range []struct {
		max  time.Duration
		want time.Duration
	}{
		{time.Second, 3 * time.Second},
		{time.Hour, 3 * time.Hour},
		{math.MaxInt64 / 2, maxTicketLife},
		{math.MaxInt64, maxTicketLife},
		{math.MaxInt64/3 + 1, maxTicketLife},
	} {
		if got := TicketLife(settings.Pace{Min: time.Millisecond, Max: tc.max}); got != tc.want {
			t.Errorf("TicketLife(Max %v) = %v; want %v", tc.max, got, tc.want)
		}
	}
}
