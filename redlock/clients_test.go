package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/redlock"
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
			lk := newLocker(t, nodes, redlock.WithDurableNodes(), redlock.WithTTL(10*time.Second))

			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				won    []*lease.Lease
				start  = make(chan struct{})
				others = make(chan error, 10)
			)
			for range 10 {
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
			if !held.Fenced() || held.Token() == 0 {
				t.Fatalf("token %v, fenced %v; want a token", held.Token(), held.Fenced())
			}
			if got := lockKeysLeft(t, srvs, key); len(got) < 2 {
				t.Fatalf("lock on servers %v; want at least a majority", got)
			}

			// A waiter with a retry longer than its context is woken by
			// the release published through Subscribe, or fails.
			got := make(chan *lease.Lease, 1)
			errc := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := lk.Acquire(wctx, key, lease.WithRetry(lease.Retry{Min: time.Minute, Max: time.Minute}))
				if err != nil {
					errc <- err
					return
				}
				got <- l
			}()
			for _, s := range srvs {
				waitSubscribed(t, s, "dlock:{"+key+"}:released")
			}
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
			if left := eventuallyNoLock(t, srvs, key); len(left) != 0 {
				t.Fatalf("lock left on servers %v after its release", left)
			}
		})
	}
}

func waitSubscribed(t *testing.T, s *redistest.Server, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for do(t, s, "PUBSUB", "NUMSUB", channel) == channel+"\n0" {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no subscriber on %s", s.Addr(), channel)
		}
		time.Sleep(time.Millisecond)
	}
}
