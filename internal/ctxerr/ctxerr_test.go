package ctxerr_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/ctxerr"
)

// deadlineOnly is a context whose deadline is d and which has not ended:
// a context.WithDeadline at the instant its deadline passes, before its
// timer ends it. The real case, a go-redis client timing out at its
// context's deadline, is single.TestResumeUnreachable; it shows only
// sometimes, this shows it always.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

func TestWrapDeadlinePassed(t *testing.T) {
	timeout := errors.New("i/o timeout")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool // matches context.DeadlineExceeded
	}{
		{"deadline passed, not ended yet", deadlineOnly{context.Background(), time.Now().Add(-time.Millisecond)}, true},
		{"deadline ahead", deadlineOnly{context.Background(), time.Now().Add(time.Hour)}, false},
		{"no deadline", context.Background(), false},
	} {
		err := ctxerr.Wrap(tc.ctx, timeout)
		if got := errors.Is(err, context.DeadlineExceeded); got != tc.want || !errors.Is(err, timeout) {
			t.Errorf("%s: Wrap = %v; matches DeadlineExceeded %v, want %v, and the client's error", tc.name, err, got, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ctxerr.Wrap(ctx, timeout); !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: Wrap = %v; want Canceled only", err)
	}
}
