package dlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestOpenNotifier: the Locker Open returns, of either strategy and over
// either client, is a dlock.Notifier whose notices reach its watchers.
func TestOpenNotifier(t *testing.T) {
	single := redistest.Start(t)
	quorum := redistest.StartN(t, 3)
	for _, tc := range []struct {
		strategy string
		srvs     []*redistest.Server
	}{
		{dlock.StrategySingle, []*redistest.Server{single}},
		{dlock.StrategyQuorum, quorum},
	} {
		for _, client := range []string{dlock.ClientGoRedis, dlock.ClientValkeyGo} {
			t.Run(tc.strategy+"/"+client, func(t *testing.T) {
				ctx := t.Context()
				var addrs []string
				for _, s := range tc.srvs {
					addrs = append(addrs, s.Addr())
				}
				lk, err := dlock.Open(ctx, dlock.Config{Strategy: tc.strategy, Client: client, Addrs: addrs, DurableNodes: tc.strategy == dlock.StrategyQuorum})
				require.NoError(t, err, "Open")
				defer lk.Close()
				n, ok := lk.(dlock.Notifier)
				if !ok {
					t.Fatalf("Open returned a %T, not a dlock.Notifier", lk)
				}
				msgs, stop, err := n.Watch(ctx, "notice-"+client)
				require.NoError(t, err, "Watch")
				defer stop()
				require.NoError(t, n.Publish(ctx, "notice-"+client, "hello"), "Publish")
				select {
				case m := <-msgs:
					if m != "hello" {
						t.Fatalf("got %q; want hello", m)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no message")
				}
			})
		}
	}
}
