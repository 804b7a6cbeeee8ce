package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
)

// TestHolderPause is the pause every lock shares: A holds, stalls past its
// TTL (GC, a stopped VM), B acquires, then A writes as if it still held.
// A resource that knows nothing of tokens takes A's write (an unfenced
// double write); a fenced one refuses it, for both strategies. Plain
// Redlock (option.Tokens(false)) hands out no token, so nothing can fence it.
func TestHolderPause(t *testing.T) {
	const ttl = 600 * time.Millisecond
	for _, strategy := range []string{"single", "quorum", "quorum-notokens"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			forEachClient(t, func(t *testing.T, client string) {
				row := &Row{Scenario: "4 holder pause", Variant: "A stalls past a 600ms TTL", Strategy: strategy, Client: client,
					Expected: "no overlap; A's late write: unfenced accepted (1), fenced refused (1)"}
				var lk locker
				switch strategy {
				case "single":
					srv := redistest.Start(t)
					lk = newSingle(t, redistest.NodeFor(t, client, srv.Addr()), option.TTL(ttl))
				default:
					opts := []option.Option{option.DurableNodes(true), option.TTL(ttl)}
					if strategy == "quorum-notokens" {
						opts = append(opts, option.Tokens(false))
						row.Expected = "no overlap; A's late write accepted (1): no token to fence with"
					}
					lk = newQuorum(t, nodesOn(t, client, addrs(redistest.StartN(t, 5))...), opts...)
				}
				record(t, row)
				redistest.Warm(t, lk)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				res := newResource()

				a, err := lk.TryAcquire(ctx, "k")
				require.NoError(t, err)
				res.granted(a)
				require.NoError(t, res.write(a, "a1"), "A's write while valid")
				// The stall: past A's validity and the servers' expiry.
				time.Sleep(a.TTL() + ttl/10)

				var b interface{ Release(context.Context) error }
				for {
					bl, err := lk.TryAcquire(ctx, "k")
					if err == nil {
						res.granted(bl)
						if err := res.write(bl, "b1"); err != nil {
							t.Errorf("B's write: %v", err)
						}
						b = bl
						break
					}
					if ctx.Err() != nil {
						t.Fatalf("B never acquired: %v", err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				errA := res.write(a, "a2") // A wakes up and writes
				_ = b.Release(ctx)
				res.fill(t, row)
				row.Observed = fmt.Sprintf("A token %v; A's late write to the fenced resource: %s", a.Token(), outcome(errA))
				if strategy == "quorum-notokens" {
					row.Observed = "tokens are 0: the fence has nothing to compare"
				}
				if *row.Overlaps != 0 || *row.UnfencedDoubleWrites != 1 {
					t.Errorf("overlaps %d, unfenced double writes %d; want 0 and 1", *row.Overlaps, *row.UnfencedDoubleWrites)
				}
				if strategy != "quorum-notokens" {
					if errA == nil || *row.StaleAccepted != 0 || *row.FencedRefused != 1 {
						t.Errorf("fenced: A's late write %v, stale accepted %d, refused %d; want refused: 0 and 1",
							errA, *row.StaleAccepted, *row.FencedRefused)
					}
				}
			})
		})
	}
}
