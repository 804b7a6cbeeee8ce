package single_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// TestEveryClient runs the strategy end to end on each client library a
// Node can be built on (redistest.AllClients), where the rest of the
// suite runs on redistest.Clients: one winner among contenders, tokens
// that rise, a waiter woken by the published release, and WAIT counting
// a replica's acknowledgement, or its absence.
func TestEveryClient(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, redistest.WithReplicaOf(master))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, replica.WaitSynced(ctx))
	require.NoError(t, replica.WaitAcking(ctx))
	for _, c := range redistest.AllNodes(t, master.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			key := "every-" + c.Name
			lk := newLocker(t, c.Node)

			held := redistest.OneWinner(t, 20, func() (*lease.Lease, error) { return lk.TryAcquire(ctx, key) })
			waiter := newLocker(t, c.Node)
			next := redistest.WokenByRelease(t, held, func(ctx context.Context, opts ...option.Option) (*lease.Lease, error) {
				return waiter.Acquire(ctx, key, opts...)
			}, func() { master.WaitSubscribed(t, "dlock:{"+key+"}:released") })
			require.NoError(t, next.Release(ctx), "waiter's Release")

			// WAIT after the claim, on its connection.
			rep := newLocker(t, c.Node, option.Replicas(1, 500*time.Millisecond))
			l, err := rep.TryAcquire(ctx, key)
			require.NoError(t, err, "TryAcquire with the replica up")
			if l.Token() <= next.Token() {
				t.Fatalf("token %d; want above %d", l.Token(), next.Token())
			}
			require.NoError(t, l.Release(ctx))
			replica.MustDo(t, "CLIENT", "PAUSE", "10000", "WRITE")
			defer replica.MustDo(t, "CLIENT", "UNPAUSE")
			_, err = rep.TryAcquire(ctx, key)
			var re *single.ReplicaError
			if !errors.Is(err, single.ErrReplicas) || !errors.As(err, &re) || re.Acked != 0 || re.Wanted != 1 {
				t.Fatalf("TryAcquire with the replica paused: %v; want *ReplicaError{Acked: 0, Wanted: 1}", err)
			}
			if got := field(t, master, key, "owner"); got != "" {
				t.Fatalf("owner = %q after a failed claim; want none", got)
			}
		})
	}
}
