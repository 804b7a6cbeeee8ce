package dlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestOpenNotifier: the notices of the Client Open returns, of either
// strategy and over either client, reach its watchers.
func TestOpenNotifier(t *testing.T) {
	single := redistest.Start(t)
	quorum := redistest.StartN(t, 3)
	for _, tc := range []struct {
		strategy string
		srvs     []*redistest.Server
	}{
		{connect.StrategySingle, []*redistest.Server{single}},
		{connect.StrategyQuorum, quorum},
	} {
		for _, client := range []string{connect.ClientGoRedis, connect.ClientValkeyGo} {
			t.Run(tc.strategy+"/"+client, func(t *testing.T) {
				ctx := t.Context()
				var addrs []string
				for _, s := range tc.srvs {
					addrs = append(addrs, s.Addr())
				}
				lk, err := dlock.Open(ctx, dlock.Config{Strategy: tc.strategy, Client: client, Addrs: addrs, DurableNodes: tc.strategy == connect.StrategyQuorum})
				require.NoError(t, err, "Open")
				defer lk.Close()
				msgs, stop, err := lk.Watch(ctx, "notice-"+client)
				require.NoError(t, err, "Watch")
				defer stop()
				require.NoError(t, lk.Publish(ctx, "notice-"+client, "hello"), "Publish")
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
