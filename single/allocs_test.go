//go:build !race

package single_test

import (
	"context"
	"testing"

	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/single"
)

// Allocation counts mean nothing under the race detector (sync.Pool drops
// items at random), so this file is built without it; scripts/test.sh runs
// it in a pass of its own.

// TestNilObserverAllocs: without an observer, TryAcquire+Release on
// valkey-go stays within its allocation budget (see BenchmarkTryAcquireRelease),
// so reporting costs nothing when nobody listens.
func TestNilObserverAllocs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
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
	plain, nilObs := newLocker(t, n), newLocker(t, n, single.WithObserver(nil))
	for range 200 { // load the scripts, grow the client's buffers
		run(plain)()
		run(nilObs)()
	}
	a := testing.AllocsPerRun(500, run(plain))
	b := testing.AllocsPerRun(500, run(nilObs))
	t.Logf("allocs per TryAcquire+Release: %.1f without WithObserver, %.1f with WithObserver(nil)", a, b)
	const budget = 12
	if a > budget || b > budget {
		t.Errorf("allocs %.1f and %.1f; want <= %d", a, b, budget)
	}
}
