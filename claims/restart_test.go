package claims_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// reachable waits until q's server answers again after a restart, on
// every connection of the client (see redistest.Settled: a client may fail
// its first call on a connection the restart broke), and returns q's
// stats then.
func reachable(t *testing.T, q *claims.Queue) claims.Stats {
	t.Helper()
	var s claims.Stats
	redistest.Settled(t, func(ctx context.Context) (err error) {
		s, err = q.Stats(ctx)
		return err
	})
	return s
}

// TestRestartWithoutPersistence: a server restarted without persistence
// comes back empty: every item, pending or claimed, is lost, and so are
// the items' counters. A worker that held an item is refused at Complete;
// once the item is added again (from the caller's own record of it), its
// new claim's token, floored at the server's clock, is above the lost
// one's, and the old worker is refused as stale.
func TestRestartWithoutPersistence(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "volatile", option.TTL(time.Minute))
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x", "y"))
		a := claim(t, q)
		srv.Restart()
		if s := reachable(t, q); s != (claims.Stats{}) {
			t.Fatalf("after the restart: %+v; want nothing: x and y are lost", s)
		}
		if err := a.Complete(ctx); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Complete of a claim the restart lost: %v; want ErrNotHeld, not ErrStale", err)
		}
		require.NoError(t, q.Add(ctx, "x"))
		b := claim(t, q)
		if b.ID() != "x" || b.Attempt() != 1 || b.Token() <= a.Token() {
			t.Fatalf("claim of x added again: %q at attempt %d, token %d; want x at attempt 1 (its count lost) with a token above %d",
				b.ID(), b.Attempt(), b.Token(), a.Token())
		}
		// The Complete above failed, so the claim asks the server again.
		wantStale(t, "Complete of the claim from before the restart", a.Complete(ctx), a.Token(), b.Token())
		require.NoError(t, b.Complete(ctx))
	})
}

// TestRestartWithAOF: with every write persisted before it is
// acknowledged, a restart loses nothing: pending and claimed items, their
// tokens and leases, and the done records, are all back.
func TestRestartWithAOF(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithAOF())
			q := newQueue(t, redistest.NodeFor(t, client, srv.Addr()), "durable", option.TTL(time.Minute))
			ctx := t.Context()
			require.NoError(t, q.Add(ctx, "x", "y", "z"))
			x, y := claim(t, q), claim(t, q)
			require.NoError(t, y.Complete(ctx))
			srv.Restart()
			if s := reachable(t, q); s != (claims.Stats{Pending: 1, Claimed: 1}) {
				t.Fatalf("after the restart: %+v; want z pending, x claimed", s)
			}
			require.NoError(t, x.Lease().Extend(ctx, time.Minute), "Extend of a claim from before the restart")
			if done, err := srv.Do("GET", claims.Base(q)+":done:y"); err != nil || done != y.Token().String() {
				t.Fatalf("y's done record after the restart: %q, %v; want its token %s", done, err, y.Token())
			}
			require.NoError(t, q.Add(ctx, "y"))
			z := claim(t, q)
			if z.ID() != "z" {
				t.Fatalf("claimed %q; want z (y's done record keeps it out)", z.ID())
			}
			require.NoError(t, x.Complete(ctx))
			require.NoError(t, z.Complete(ctx))
			if s := stats(t, q); s != (claims.Stats{}) {
				t.Fatalf("at the end: %+v; want an empty queue", s)
			}
		})
	}
}
