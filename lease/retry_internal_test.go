package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitRetriesRetryable(t *testing.T) {
	down := errors.New("node down")
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, Retry{Min: time.Millisecond, Max: time.Millisecond}, nil,
		func(context.Context) (*Lease, time.Duration, error) { n++; return nil, 0, Retryable(down) })
	if n < 2 {
		t.Errorf("attempts = %d; want a retry", n)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, down) {
		t.Errorf("err = %v; want it to match the deadline and the last attempt's error", err)
	}
	if errors.Is(err, ErrTaken) {
		t.Errorf("err = %v matches ErrTaken; a retryable failure is not a taken lock", err)
	}
}
