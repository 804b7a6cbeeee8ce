package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

// What the server keeps for a key must be bounded by its live holders and
// waiters, or expire: these tests count it.

// lockKeys returns the server keys of key's lock that exist, with their
// sizes in bytes.
func lockKeys(t *testing.T, srv *redistest.Server, key string) map[string]int64 {
	t.Helper()
	h := rwlock.KeyOf(key)
	out := map[string]int64{}
	for _, suffix := range []string{"", ":r", ":q", ":qd", ":qw", ":gone"} {
		n, err := srv.MemoryUsage(h + suffix)
		require.NoError(t, err)
		if n > 0 {
			out[h+suffix] = n
		}
	}
	return out
}

// maxHashBytes bounds the one hash a key keeps between leases: attempts,
// exp, and a released writer's until and owner when one ran out.
const maxHashBytes = 200

// TestMemoryOneKey: thousands of readers and writers coming and going on
// one key, blocking and trying, leave one small hash, set to expire, and
// nothing else.
func TestMemoryOneKey(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		const key, workers, rounds = "hot", 8, 300
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					var (
						l   *lease.Lease
						err error
					)
					switch (w + i) % 5 {
					case 0:
						l, err = lk.Acquire(ctx, key)
					case 1:
						l, err = lk.TryAcquire(ctx, key)
					case 2:
						l, err = lk.TryAcquireShared(ctx, key)
					default:
						l, err = lk.AcquireShared(ctx, key)
					}
					if errors.Is(err, lease.ErrTaken) {
						continue
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
		keys := lockKeys(t, srv, key)
		h := rwlock.KeyOf(key)
		if len(keys) != 1 || keys[h] == 0 || keys[h] > maxHashBytes {
			t.Fatalf("after %d acquire+release: %v; want only the hash, at most %d bytes", workers*rounds, keys, maxHashBytes)
		}
		all, err := srv.Keys()
		require.NoError(t, err)
		if len(all) != 1 {
			t.Fatalf("keys on the server: %q; want the one hash", all)
		}
		pttl := do(t, srv, "PTTL", h)
		if ms, _ := strconv.ParseInt(pttl, 10, 64); ms <= settings.DefaultIdleTTL.Milliseconds() || ms > 3*(settings.DefaultTTL+settings.DefaultIdleTTL).Milliseconds()/2 {
			t.Errorf("the hash's PTTL = %s; want it past the idle TTL, within 1.5 × (TTL + idle TTL)", pttl)
		}
		t.Logf("after %d acquire+release of one key: %v", workers*rounds, keys)
	})
}

// TestMemoryDistinctKeys: keys used once by a reader and a writer (a lock
// per entity) leave nothing behind once their idle TTL has passed.
func TestMemoryDistinctKeys(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		const idle = 2 * time.Second
		lk := newLocker(t, n, option.TTL(time.Second), option.IdleTTL(idle))
		before, err := srv.UsedMemory()
		require.NoError(t, err)
		const keys = 2000
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < keys; i += 8 {
					k := "doc:" + strconv.Itoa(i)
					for _, f := range []func(context.Context, string, ...option.Option) (*lease.Lease, error){lk.AcquireShared, lk.Acquire} {
						l, err := f(ctx, k)
						if err == nil {
							err = l.Release(ctx)
						}
						if err != nil {
							t.Errorf("key %d: %v", i, err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		full, err := srv.UsedMemory()
		require.NoError(t, err)
		all, err := srv.Keys()
		require.NoError(t, err)
		if len(all) != keys {
			t.Errorf("%d keys with %d idle locks; want one hash each", len(all), keys)
		}
		srv.WaitKeysGone(t, 10*time.Second+2*idle, func(string) bool { return true })
		t.Logf("used_memory: %d bytes before, %d with %d idle locks (%d per lock)", before, full, keys, (full-before)/keys)
	})
}

// TestMemoryDeadHoldersAndWaiters: the leases of readers and writers that
// died, the tickets of waiters that died without leaving, and the records
// of abandoned claims all expire on their own.
func TestMemoryDeadHoldersAndWaiters(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	const ttl, idle = 300 * time.Millisecond, time.Second
	lk := newLocker(t, n, option.TTL(ttl), option.IdleTTL(idle))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Holders that die: 30 keys with 3 readers each, 30 with a writer,
	// never released.
	for i := range 30 {
		for range 3 {
			_, err := lk.TryAcquireShared(ctx, "dead-r:"+strconv.Itoa(i))
			require.NoError(t, err)
		}
		_, err := lk.TryAcquire(ctx, "dead-w:"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	// Waiters that die: writer tickets behind the readers, reader tickets
	// behind the writers.
	for i := range 20 {
		ghost(t, n, "dead-r:"+strconv.Itoa(i), fmt.Sprintf("%032d", i), "w", 1000)
		ghost(t, n, "dead-w:"+strconv.Itoa(i), fmt.Sprintf("%032d", 100+i), "r", 1000)
	}
	// Claims abandoned: their replies lost.
	lossy, d := lossyLocker(t, srv, -1, option.TTL(ttl), option.IdleTTL(idle))
	for i := range 10 {
		d.Drop(0, 1)
		try := lossy.TryAcquire
		if i%2 == 1 {
			try = lossy.TryAcquireShared
		}
		if l, err := try(ctx, "lossy"); err == nil {
			_ = l.Release(ctx)
			t.Fatal("a try with its reply lost: granted")
		}
	}
	if v := do(t, srv, "ZCARD", rwlock.KeyOf("lossy")+":gone"); v != "10" {
		t.Fatalf("ZCARD of the gone records = %s; want the 10 abandoned claims", v)
	}
	all, err := srv.Keys()
	require.NoError(t, err)
	var used int64
	for _, k := range all {
		m, err := srv.MemoryUsage(k)
		require.NoError(t, err)
		used += m
	}
	t.Logf("%d keys, %d bytes (MEMORY USAGE) with dead holders, dead waiters and abandoned claims", len(all), used)
	// Readers' sets last at most 1.5 × TTL, tickets their deadline, gone
	// records max(10 s, 2 × TTL), hashes 1.5 × (TTL + idle TTL).
	start := time.Now()
	srv.WaitKeysGone(t, 15*time.Second, func(k string) bool { return strings.HasPrefix(k, "dlock:rw:") })
	t.Logf("every key gone %v after the last of them", time.Since(start))
}
