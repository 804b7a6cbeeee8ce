//go:build !race

package quorum_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// Allocation counts mean nothing under the race detector (sync.Pool drops
// items at random), so this file is built without it; scripts/test.sh runs
// it in a pass of its own.

// TestQuorumAllocs: an uncontended TryAcquire+Release on five nodes stays
// within each client's and mode's allocation budget (see
// BenchmarkTryAcquireRelease). The budgets are the counts measured plus a
// small margin: a vote that answers after the quorum may find the lease
// already released and undo itself, which allocates a little, and how
// often that happens varies from run to run. Most of go-redis's count is
// its own (see single's BenchmarkEvalFloor).
func TestQuorumAllocs(t *testing.T) {
	budgets := map[string]float64{
		"go-redis/tokens":    130,
		"go-redis/notokens":  100,
		"valkey-go/tokens":   45,
		"valkey-go/notokens": 42,
	}
	srvs := redistest.StartN(t, benchNodes)
	for _, client := range redistest.Clients {
		ns := make([]node.Node, len(srvs))
		for i, s := range srvs {
			ns[i] = redistest.NodeFor(t, client, s.Addr())
		}
		for _, mode := range []string{"tokens", "notokens"} {
			name := client + "/" + mode
			t.Run(name, func(t *testing.T) {
				budget, ok := budgets[name]
				if !ok {
					t.Fatalf("no allocation budget for %q", name)
				}
				opts := []option.Option{option.DurableNodes(true)}
				if mode == "notokens" {
					opts = append(opts, option.Tokens(false))
				}
				lk, err := quorum.New(ns, opts...)
				require.NoError(t, err, "New")
				defer lk.Close()
				ctx := context.Background()
				run := func() {
					l, err := lk.TryAcquire(ctx, "allocs")
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for range 200 { // load the scripts, grow the clients' buffers, fill the pools
					run()
				}
				// Late votes, undone after the Release, add allocations
				// when the machine is busy, never fewer: the least of a
				// few rounds is the path's own figure.
				got := testing.AllocsPerRun(300, run)
				for range 2 {
					got = min(got, testing.AllocsPerRun(300, run))
				}
				t.Logf("allocs per TryAcquire+Release: %.1f (least of 3 rounds)", got)
				if got > budget {
					t.Errorf("allocs %.1f; want <= %v", got, budget)
				}
			})
		}
	}
}
