package ctxerr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// A detached error keeps its text and what it matches, but a context's
// end; wrapped with an ended context it matches that end again.
func TestDetach(t *testing.T) {
	sentinel := errors.New("node down")
	err := fmt.Errorf("node 1: %w: %w", sentinel, context.DeadlineExceeded)
	d := ctxerr.Detach(err)
	if d.Error() != err.Error() || !errors.Is(d, sentinel) {
		t.Errorf("Detach = %v; want the text and the sentinel kept", d)
	}
	if errors.Is(d, context.DeadlineExceeded) || errors.Is(ctxerr.Detach(context.Canceled), context.Canceled) {
		t.Errorf("Detach = %v; want no context error matched", d)
	}
	var pe *os.PathError
	if !errors.As(ctxerr.Detach(fmt.Errorf("x: %w", &os.PathError{Op: "open"})), &pe) || pe.Op != "open" {
		t.Errorf("Detach lost what errors.As finds")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w := ctxerr.Wrap(ctx, d); !errors.Is(w, context.Canceled) {
		t.Errorf("Wrap(ended ctx, detached) = %v; want Canceled", w)
	}
	if ctxerr.Detach(nil) != nil {
		t.Errorf("Detach(nil) != nil")
	}
}
