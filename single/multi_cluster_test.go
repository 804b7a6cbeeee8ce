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
)

// TestAcquireAllCluster: on a 3-master cluster, a set in one slot (one
// hash tag) is one script; a set spread over the masters is taken key by
// key and is still all or nothing: held whole against single locks,
// rolled back when a key is taken, waited for, and served to callers
// asking in opposite orders.
func TestAcquireAllCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			lk := newLocker(t, c.Node)
			tagged, err := lk.TryAcquireAll(ctx, []string{"{acct}:1", "{acct}:2"})
			require.NoError(t, err, "a set in one slot")
			require.NoError(t, tagged.Release(ctx))

			keys := []string{keyOn(t, cl, 2, c.Name+"-z"), keyOn(t, cl, 0, c.Name+"-a"), keyOn(t, cl, 1, c.Name+"-m")}
			set, err := lk.TryAcquireAll(ctx, keys)
			require.NoError(t, err, "a set over three masters")
			for i, h := range set.Keys() {
				if h.Key != keys[i] || h.Token == 0 {
					t.Fatalf("Keys()[%d] = %+v; want %s with a token", i, h, keys[i])
				}
				if got := clusterField(t, cl, []int{2, 0, 1}[i], h.Key, "owner"); got == "" {
					t.Fatalf("%s: no owner on its master", h.Key)
				}
				if _, err := lk.TryAcquire(ctx, h.Key); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("TryAcquire(%s) under the set: %v; want ErrTaken", h.Key, err)
				}
			}
			require.NoError(t, set.Extend(ctx, 5*time.Second))
			require.NoError(t, set.Release(ctx))

			held, err := lk.TryAcquire(ctx, keys[2])
			require.NoError(t, err)
			if _, err := lk.TryAcquireAll(ctx, keys); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("TryAcquireAll with %s held: %v; want ErrTaken", keys[2], err)
			}
			for i, k := range keys[:2] {
				if got := clusterField(t, cl, []int{2, 0}[i], k, "owner"); got != "" {
					t.Fatalf("%s after a refused set: owner %q; want it rolled back", k, got)
				}
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				_ = held.Release(context.Background())
			}()
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			waited, err := lk.AcquireAll(wctx, keys)
			cancel()
			require.NoError(t, err, "AcquireAll once the key was released")
			require.NoError(t, waited.Release(ctx))

			var wg sync.WaitGroup
			for w, ask := range [][]string{{keys[0], keys[1]}, {keys[1], keys[0]}, {keys[1], keys[2]}} {
				wg.Go(func() {
					for i := range 8 {
						actx, cancel := context.WithTimeout(ctx, 20*time.Second)
						l, err := lk.AcquireAll(actx, ask)
						cancel()
						if err != nil {
							t.Errorf("caller %d round %d: %v", w, i, err)
							return
						}
						time.Sleep(5 * time.Millisecond)
						if err := l.Release(ctx); err != nil {
							t.Errorf("caller %d round %d: release: %v", w, i, err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
