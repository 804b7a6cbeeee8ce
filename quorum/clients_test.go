package quorum_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// TestEveryClient runs the strategy end to end on each client library a
// Node can be built on (redistest.AllClients), where the rest of the
// suite runs on redistest.Clients: on a quorum of three servers, one
// winner among contenders, the lock on a majority and then released
// from every server, rising tokens, and a waiter woken by the published release.
func TestEveryClient(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	for _, client := range redistest.AllClients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			key := "every-" + client
			nodes := make([]node.Node, len(srvs))
			for i, s := range srvs {
				nodes[i] = redistest.NodeFor(t, client, s.Addr())
			}
			lk := newLocker(t, nodes, option.DurableNodes(true), option.TTL(10*time.Second))

			held := redistest.OneWinner(t, 10, func() (*lease.Lease, error) { return lk.TryAcquire(ctx, key) })
			if !held.Fenced() || held.Token() == 0 {
				t.Fatalf("token %v, fenced %v; want a token", held.Token(), held.Fenced())
			}
			if got := lockKeysLeft(t, srvs, key); len(got) < 2 {
				t.Fatalf("lock on servers %v; want at least a majority", got)
			}

			next := redistest.WokenByRelease(t, held, func(ctx context.Context, opts ...option.Option) (*lease.Lease, error) {
				return lk.Acquire(ctx, key, opts...)
			}, func() {
				for _, s := range srvs {
					s.WaitSubscribed(t, "dlock:{"+key+"}:released")
				}
			})
			require.NoError(t, next.Release(ctx), "waiter's Release")
			if left := eventuallyNoLock(t, srvs, key); len(left) != 0 {
				t.Fatalf("lock left on servers %v after its release", left)
			}
		})
	}
}
