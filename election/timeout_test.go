package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// TestLeaderNodeTimeoutIsNotADeadline: with three of five nodes stopped,
// Leader cannot tell whether the office is vacant; the nodes' timeouts
// in its error are theirs, not the end of the caller's context, and it
// matches neither a context error nor ErrNoLeader.
func TestLeaderNodeTimeoutIsNotADeadline(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 5)
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		addrs[i] = s.Addr()
	}
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			lk, err := quorum.New(nodesFor(t, client, addrs), option.NodeTimeout(testNodeTimeout), option.DurableNodes(true))
			require.NoError(t, err)
			t.Cleanup(func() { _ = lk.Close() })
			el := newElection(t, lk, "stopped-"+client)
			var resume []func()
			for _, s := range srvs[2:] {
				resume = append(resume, s.PauseOnce())
				defer resume[len(resume)-1]()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err = el.Leader(ctx)
			if err == nil || errors.Is(err, election.ErrNoLeader) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("Leader, 3 of 5 nodes stopped: %v; want an error that is neither ErrNoLeader nor a context error", err)
			}
			for _, f := range resume {
				f()
			}
		})
	}
}
