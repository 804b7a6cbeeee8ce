package quorum_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// What the quorum strategy keeps on its nodes for a key must be bounded by
// the key's live owners and waiters, or expire: these tests count it.

// keyBytes returns, for each server, the keys of the lock on key that
// exist and their sizes in bytes.
func keyBytes(t *testing.T, srvs []*redistest.Server, key string) []map[string]int64 {
	t.Helper()
	out := make([]map[string]int64, len(srvs))
	for i, s := range srvs {
		out[i] = map[string]int64{}
		for _, suffix := range []string{"lock", "fence", "gone", "queue", "queue:deadlines"} {
			k := "dlock:{" + key + "}:" + suffix
			n, err := s.MemoryUsage(k)
			require.NoError(t, err)
			if n > 0 {
				out[i][suffix] = n
			}
		}
	}
	return out
}

// TestMemoryOneKey: thousands of lock+unlock of one key, blocking waiters
// among them, leave its fence counter, set to expire, and nothing else.
func TestMemoryOneKey(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		const ttl = 5 * time.Second
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(ttl))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		const key, workers, rounds = "hot", 4, 750
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					var l *lease.Lease
					var err error
					if (w+i)%2 == 0 {
						l, err = lk.Acquire(ctx, key)
					} else if l, err = lk.TryAcquire(ctx, key); err != nil {
						var qe *quorum.Error
						if errors.As(err, &qe) {
							continue // taken, or a split vote
						}
					}
					if err != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		// Releases finish on the last nodes in the background; a release
		// that found no lock where its vote's call had timed out (a loaded
		// machine) records the owner as gone, for the TTL (goneKeep).
		var got []map[string]int64
		for deadline := time.Now().Add(2*time.Second + ttl); ; time.Sleep(20 * time.Millisecond) {
			got = keyBytes(t, srvs, key)
			left := false
			for _, m := range got {
				left = left || len(m) != 1 || m["fence"] == 0 || m["fence"] > 128
			}
			if !left || time.Now().After(deadline) {
				break
			}
		}
		for i, m := range got {
			if len(m) != 1 || m["fence"] == 0 || m["fence"] > 128 {
				t.Errorf("node %d after %d lock+unlock: %v; want only the fence counter, at most 128 bytes", i, workers*rounds, m)
			}
			pttl := do(t, srvs[i], "PTTL", "dlock:{"+key+"}:fence")
			if ms, _ := strconv.ParseInt(pttl, 10, 64); ms <= 0 || ms > (ttl+settings.DefaultIdleTTL).Milliseconds() {
				t.Errorf("node %d: the counter's PTTL = %s; want it to expire within the TTL and the idle TTL", i, pttl)
			}
		}
		t.Logf("after %d lock+unlock of one key: %v", workers*rounds, got)
	})
}

// TestMemoryDistinctKeys: keys locked once (a lock per entity) leave
// nothing behind once their idle TTL has passed, but the node-wide marks.
func TestMemoryDistinctKeys(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		const idle = time.Second
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(time.Second), option.IdleTTL(idle))
		redistest.LockOnce(t, lk, 5000, 8, func(i int) string { return "order:" + strconv.Itoa(i) })
		for _, s := range srvs {
			s.WaitKeysGone(t, 10*time.Second+2*idle, func(k string) bool { return strings.HasPrefix(k, "dlock:{") })
		}
	})
}
