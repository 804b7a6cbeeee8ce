package single_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
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
	for _, c := range redistest.AllNodes(t, master.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			key := "every-" + c.Name
			lk := newLocker(t, c.Node)

			// Contention: of 20 contenders, exactly one wins.
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				won    []*lease.Lease
				start  = make(chan struct{})
				others = make(chan error, 20)
			)
			for range 20 {
				wg.Go(func() {
					<-start
					l, err := lk.TryAcquire(ctx, key)
					if err != nil {
						others <- err
						return
					}
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				})
			}
			close(start)
			wg.Wait()
			close(others)
			for err := range others {
				if !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("TryAcquire: %v; want nil or ErrTaken", err)
				}
			}
			if len(won) != 1 {
				t.Fatalf("%d winners; want 1", len(won))
			}
			held := won[0]

			// A waiter with a retry longer than its context is woken by
			// the release published through Subscribe, or fails.
			waiter := newLocker(t, c.Node)
			got := make(chan *lease.Lease, 1)
			errc := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := waiter.Acquire(wctx, key, lease.WithRetry(lease.Retry{Min: time.Minute, Max: time.Minute}))
				if err != nil {
					errc <- err
					return
				}
				got <- l
			}()
			waitSubscribed(t, master, "dlock:{"+key+"}:released")
			require.NoError(t, held.Release(ctx), "Release")
			var next *lease.Lease
			select {
			case next = <-got:
			case err := <-errc:
				t.Fatalf("waiter: %v; want woken by the release", err)
			}
			if next.Token() <= held.Token() {
				t.Fatalf("waiter's token %d; want above the holder's %d", next.Token(), held.Token())
			}
			require.NoError(t, next.Release(ctx), "waiter's Release")

			// WAIT after the claim, on its connection.
			rep := newLocker(t, c.Node, single.WithReplicas(1, 500*time.Millisecond))
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
