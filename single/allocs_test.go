//go:build !race

package single_test

import (
	"context"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// Allocation counts mean nothing under the race detector (sync.Pool drops
// items at random), so this file is built without it; scripts/test.sh runs
// it in a pass of its own.

// TestNilObserverAllocs: without an observer, TryAcquire+Release stays
// within each client's allocation budget (see BenchmarkTryAcquireRelease),
// so reporting costs nothing when nobody listens. The budgets are the
// counts measured, to catch any allocation added to the fast path; most of
// go-redis's are its own (see BenchmarkEvalFloor).
func TestNilObserverAllocs(t *testing.T) {
	budgets := map[string]float64{"go-redis": 14, "valkey-go": 5}
	srv := redistest.Start(t)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			budget, ok := budgets[c.Name]
			if !ok {
				t.Fatalf("no allocation budget for client %q", c.Name)
			}
			ctx := context.Background()
			run := func(lk *single.Locker) func() {
				return func() {
					l, err := lk.TryAcquire(ctx, "allocs")
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			plain, nilObs := newLocker(t, c.Node), newLocker(t, c.Node, option.Observer(nil))
			for range 200 { // load the scripts, grow the client's buffers
				run(plain)()
				run(nilObs)()
			}
			a := testing.AllocsPerRun(500, run(plain))
			b := testing.AllocsPerRun(500, run(nilObs))
			t.Logf("allocs per TryAcquire+Release: %.1f without option.Observer, %.1f with option.Observer(nil)", a, b)
			if a > budget || b > budget {
				t.Errorf("allocs %.1f and %.1f; want <= %v", a, b, budget)
			}
		})
	}
}
