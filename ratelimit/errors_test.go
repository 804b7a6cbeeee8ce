package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/ratelimit"
)

// TestNoQuorumIsNotADeadline: with two of three nodes stopped, Allow
// fails with ErrNoQuorum, which keeps the first node's error in its text
// but does not match a context error: the caller's context did not end,
// only the nodes' calls timed out. A caller whose own deadline ends the
// call gets a DeadlineExceeded. (Wait returns the error of its call:
// cmd/dlock's TestRunRateUnavailable runs it.)
func TestNoQuorumIsNotADeadline(t *testing.T) {
	t.Parallel()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srvs := redistest.StartN(t, 3)
			// Each call on clients of its own: a go-redis (RESP3) call
			// that follows a timed-out one on a stopped server may
			// block past its ctx, reading pending pushes.
			limiter := func() *ratelimit.Limiter {
				return newLimiter(t, nodesFor(t, client, srvs), ratelimit.Limit{Rate: 10, Per: time.Second},
					option.NodeTimeout(100*time.Millisecond))
			}
			lim, slim := limiter(), limiter()
			for _, s := range srvs[1:] {
				resume := s.PauseOnce()
				t.Cleanup(resume) // before the servers' own cleanup
				defer resume()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := lim.Allow(ctx, "stopped")
			checkNoQuorum(t, "Allow", err)
			// The caller's own deadline, before the nodes', is a deadline.
			short, scancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer scancel()
			_, err = slim.Allow(short, "stopped")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Allow with a 20ms deadline, nodes stopped: %v; want DeadlineExceeded", err)
			}
		})
	}
}

// checkNoQuorum fails t unless err is ErrNoQuorum, names the node's
// failure and matches no context error.
func checkNoQuorum(t *testing.T, call string, err error) {
	t.Helper()
	if !errors.Is(err, ratelimit.ErrNoQuorum) {
		t.Errorf("%s: %v; want ErrNoQuorum", call, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("%s: %v matches a context error; the caller's context did not end", call, err)
	}
	if err != nil && !strings.Contains(err.Error(), "127.0.0.1:") {
		t.Errorf("%s: %v; want the first node's failure in the text", call, err)
	}
}

// TestNodeTimeoutIsNotADeadline: on one node with option.NodeTimeout, a call
// the node timeout cut short is the server's failure, not a deadline of
// the caller's.
func TestNodeTimeoutIsNotADeadline(t *testing.T) {
	t.Parallel()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			// Each call on a client of its own, connected before the
			// pause (see TestNoQuorumIsNotADeadline).
			limiter := func() *ratelimit.Limiter {
				lim := newLimiter(t, []node.Node{redistest.NodeFor(t, client, srv.Addr())},
					ratelimit.Limit{Rate: 10, Per: time.Second}, option.NodeTimeout(100*time.Millisecond))
				_, err := lim.Allow(t.Context(), "warm")
				require.NoError(t, err)
				return lim
			}
			lim, slim := limiter(), limiter()
			resume := srv.PauseOnce()
			t.Cleanup(resume)
			defer resume()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := lim.Allow(ctx, "stopped")
			if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("Allow, the node stopped and timed out: %v; want an error that is no context error", err)
			}
			if err != nil && !strings.Contains(err.Error(), srv.Addr()) {
				t.Errorf("Allow: %v; want the node named", err)
			}
			short, scancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer scancel()
			if _, err := slim.Allow(short, "stopped"); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Allow with a 20ms deadline, the node stopped: %v; want DeadlineExceeded", err)
			}
		})
	}
}
