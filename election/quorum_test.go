package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestQuorumNodesDown: with two of five nodes down an election works as
// before; with three down no one can be elected or read, and Leader says
// so with the nodes' errors rather than report a vacancy, and the leader
// in office loses its term when its lease runs out unrenewed.
func TestQuorumNodesDown(t *testing.T) {
	t.Parallel()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx := t.Context()
			e := &env{strategy: strategyQuorum, client: client, srvs: redistest.StartN(t, 5)}
			conf := lockerConf{ttl: time.Second}
			name := e.office("down")
			obs := observe(t, newElection(t, e.locker(t, conf), name))
			next(t, obs)
			// Clients made while every node is up: valkey-go will not
			// make one for a server that is down.
			el := newElection(t, e.locker(t, conf), name)
			rival := newElection(t, e.locker(t, conf), name)

			e.srvs[0].Kill()
			e.srvs[1].Kill()
			a := campaign(t, el, "a")
			l, err := el.Leader(ctx)
			require.NoError(t, err, "Leader with two of five down")
			if l.Value != "a" || l.Token != a.Token() {
				t.Fatalf("Leader = %+v; want a with token %d", l, a.Token())
			}
			if l := nextLeader(t, obs, "a"); l.Token != a.Token() {
				t.Fatalf("observed %+v; want token %d", l, a.Token())
			}
			obs2, err := el.Observe(ctx)
			require.NoError(t, err, "Observe with two of five down")
			if l := next(t, obs2); l.Value != "a" {
				t.Fatalf("a new observer saw %+v first; want a", l)
			}

			e.srvs[2].Kill()
			if _, err := el.Leader(ctx); err == nil || errors.Is(err, election.ErrNoLeader) {
				t.Fatalf("Leader with three of five down: %v; want an error that is not ErrNoLeader", err)
			}
			ended(t, a)
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = rival.Campaign(cctx, "b")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Campaign with three of five down: %v; want DeadlineExceeded", err)
			}
			_ = a.Resign(ctx)
		})
	}
}
