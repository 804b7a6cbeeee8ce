package claims_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// What a queue keeps on the server must be bounded by its live items, or
// expire: this test counts it.

// queueKeys returns srv's keys, the done records and token floors counted
// apart.
func queueKeys(t *testing.T, srv *redistest.Server, q *claims.Queue) (keys []string, done, floors int) {
	t.Helper()
	all, err := srv.Keys()
	require.NoError(t, err)
	for _, k := range all {
		switch {
		case strings.HasPrefix(k, claims.Base(q)+":done:"):
			done++
		case strings.HasPrefix(k, claims.Base(q)+":floor:"):
			floors++
		default:
			keys = append(keys, k)
		}
	}
	return keys, done, floors
}

// dataset returns the bytes srv's data takes: INFO's used_memory_dataset,
// used_memory less the server's overhead (clients' buffers, which a pool
// of connections keeps for a while, the keyspace's own tables).
func dataset(t *testing.T, srv *redistest.Server) (int64, error) {
	t.Helper()
	v, err := srv.Info("used_memory_dataset")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// hlen returns the number of fields of the hash k.
func hlen(t *testing.T, srv *redistest.Server, k string) int {
	t.Helper()
	v, err := srv.Do("HLEN", k)
	require.NoError(t, err)
	n, err := strconv.Atoi(v)
	require.NoError(t, err)
	return n
}

// TestMemory: 5,000 items added, all claimed, then worked through by 16
// workers who return every 5th claim and let every 7th run out. Pending
// items take one sorted set; claimed ones an entry each in the items hash,
// :active and :owners, which go with them; completed items leave a done
// record and a token floor each, which expire after option.KeepDone and
// option.IdleTTL; then nothing is left.
func TestMemory(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		// keep is how long a done record and a floor last: every one must
		// still be there when the last item completes, which on a loaded
		// machine under the race detector came more than 2 s after the
		// first (4,614 records of 5,000 were left once).
		const items, workers, keep = 5000, 16, 6 * time.Second
		q := newQueue(t, n, "mem", option.KeepDone(keep), option.IdleTTL(keep))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		base := claims.Base(q)
		warmQueue(t, q) // scripts loaded, connections open
		// The warm-up's records go now rather than in keep: FLUSHALL
		// leaves the scripts loaded.
		_, err := srv.Do("FLUSHALL")
		require.NoError(t, err)
		before, err := dataset(t, srv)
		require.NoError(t, err)

		ids := make([]string, items)
		for i := range ids {
			ids[i] = "order:" + strconv.Itoa(i)
		}
		require.NoError(t, q.Add(ctx, ids...))
		pendingMem, err := dataset(t, srv)
		require.NoError(t, err)
		pendingBytes, err := srv.MemoryUsage(base + ":pending")
		require.NoError(t, err)
		if keys, _, _ := queueKeys(t, srv, q); len(keys) != 1 || keys[0] != base+":pending" {
			t.Fatalf("with %d items pending: keys %v; want only %s:pending", items, keys, base)
		}

		held := make([]*claims.Claim, items)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < items; i = next.Add(1) - 1 {
					c, err := q.Claim(ctx)
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					held[i] = c
				}
			})
		}
		wg.Wait()
		claimedMem, err := dataset(t, srv)
		require.NoError(t, err)
		if s := stats(t, q); s != (claims.Stats{Claimed: items}) || hlen(t, srv, base) != items || hlen(t, srv, base+":owners") != items {
			t.Fatalf("with every item claimed: %+v, %d entries, %d owners; want %d of each", s, hlen(t, srv, base), hlen(t, srv, base+":owners"), items)
		}
		var claimedBytes int64
		for _, k := range []string{base, base + ":active", base + ":owners"} {
			b, err := srv.MemoryUsage(k)
			require.NoError(t, err)
			claimedBytes += b
		}
		for _, c := range held[:items/2] {
			require.NoError(t, c.Retry(ctx))
		}
		if s := stats(t, q); s.Pending != items/2 || hlen(t, srv, base) != items || hlen(t, srv, base+":owners") != items/2 {
			t.Fatalf("with half returned: %+v, %d entries, %d owners; want an entry per item, an owner per claim", s,
				hlen(t, srv, base), hlen(t, srv, base+":owners"))
		}
		firstDone := time.Now()
		for _, c := range held[items/2:] {
			require.NoError(t, c.Complete(ctx))
		}

		var claimed atomic.Int64
		for range workers {
			wg.Go(func() {
				for {
					c, err := q.Claim(ctx, option.TTL(time.Second))
					if errors.Is(err, claims.ErrEmpty) {
						if s, err := q.Stats(ctx); err != nil || s.Pending+s.Claimed == 0 {
							return
						}
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					switch k := claimed.Add(1); {
					case k%7 == 0:
						_, err = srv.Do("ZADD", base+":active", "XX", "1", c.ID()) // its lease ends now
					case k%5 == 0:
						err = c.Retry(ctx)
					default:
						err = c.Complete(ctx)
					}
					if err != nil {
						t.Errorf("claim %d of %s: %v", claimed.Load(), c.ID(), err)
						return
					}
				}
			})
		}
		wg.Wait()
		full, err := dataset(t, srv)
		require.NoError(t, err)
		keys, done, floors := queueKeys(t, srv, q)
		if len(keys) != 0 || done != items || floors != items {
			t.Fatalf("with every item completed, %v after the first (records last %v): keys %v, %d done records and %d floors; want only %d of each record",
				time.Since(firstDone).Round(time.Millisecond), keep, keys, done, floors, items)
		}
		var doneBytes int64
		for _, k := range []string{base + ":done:order:0", base + ":floor:order:0"} {
			b, err := srv.MemoryUsage(k)
			require.NoError(t, err)
			doneBytes += b
			pttl, err := srv.Do("PTTL", k)
			require.NoError(t, err)
			if ms, _ := strconv.Atoi(pttl); ms <= 0 || ms > int(keep.Milliseconds()) {
				t.Fatalf("%s: PTTL %s; want it within %v", k, pttl, keep)
			}
		}
		srv.WaitKeysGone(t, 10*time.Second+keep, func(string) bool { return true })
		// The keys' bytes are freed at once; the tables that indexed them
		// shrink in the server's cron, and the allocator may keep pages:
		// most, not all, of the peak comes back.
		peak := max(claimedMem, full)
		var after int64
		for shrink := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			after, err = dataset(t, srv)
			require.NoError(t, err)
			if after-before <= (peak-before)/4 || time.Since(shrink) > 5*time.Second {
				break
			}
		}
		t.Logf("MEMORY USAGE: %d bytes per pending item, %d per claimed item, %d per completed item (done record and floor)", pendingBytes/items, claimedBytes/items, doneBytes)
		t.Logf("used_memory_dataset: %d bytes before; %d per pending item, %d per claimed item, %d per completed item (%d claims in the churn); %d once they expired",
			before, (pendingMem-before)/items, (claimedMem-before)/items, (full-before)/items, claimed.Load(), after)
		if after-before > (peak-before)/4 {
			t.Errorf("used_memory_dataset %d bytes above its start once every record expired; the queue took %d at its peak", after-before, peak-before)
		}
	})
}
