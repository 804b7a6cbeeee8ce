package permits_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// What the server keeps for a name must be bounded by its live holders and
// waiters, or expire: these tests count it.

// nameKeys returns the server keys of name that exist, with their sizes in
// bytes.
func nameKeys(t *testing.T, srv *redistest.Server, name string) map[string]int64 {
	t.Helper()
	h := permits.HashKey(name)
	out := map[string]int64{}
	for _, suffix := range []string{"", ":h", ":s", ":n", ":q", ":qx", ":gone"} {
		n, err := srv.MemoryUsage(h + suffix)
		require.NoError(t, err)
		if n > 0 {
			out[h+suffix] = n
		}
	}
	return out
}

// maxHashBytes bounds the one hash a name keeps between permits: attempts,
// exp and the last token of each slot, for a few slots.
const maxHashBytes = 256

// TestMemoryOneName: thousands of acquire+release of one name's permits,
// blocking waiters among them, leave one small hash, set to expire, and
// nothing else.
func TestMemoryOneName(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		const name, size, workers, rounds = "hot", 3, 6, 400
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					var l *lease.Lease
					var err error
					if (w+i)%2 == 0 {
						l, err = s.Acquire(ctx, name, size)
					} else if l, err = s.TryAcquire(ctx, name, size); errors.Is(err, lease.ErrTaken) {
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
		keys := nameKeys(t, srv, name)
		h := permits.HashKey(name)
		if len(keys) != 1 || keys[h] == 0 || keys[h] > maxHashBytes {
			t.Fatalf("after %d acquire+release: %v; want only the hash, at most %d bytes", workers*rounds, keys, maxHashBytes)
		}
		pttl, err := srv.Do("PTTL", h)
		require.NoError(t, err)
		if ms, _ := strconv.ParseInt(pttl, 10, 64); ms <= settings.DefaultIdleTTL.Milliseconds() || ms > 3*(settings.DefaultTTL+settings.DefaultIdleTTL).Milliseconds()/2 {
			t.Errorf("the hash's PTTL = %s; want it past the idle TTL, within 1.5 × (TTL + idle TTL)", pttl)
		}
		t.Logf("after %d acquire+release of one name: %v", workers*rounds, keys)
	})
}

// TestMemoryDistinctNames: names used once (a semaphore per entity) leave
// nothing behind once their idle TTL has passed.
func TestMemoryDistinctNames(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		const idle = 2 * time.Second
		s := newSemaphore(t, n, option.TTL(time.Second), option.IdleTTL(idle))
		before, err := srv.UsedMemory()
		require.NoError(t, err)
		const names = 3000
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < names; i += 8 {
					l, err := s.Acquire(ctx, "tenant:"+strconv.Itoa(i), 4)
					if err == nil {
						err = l.Release(ctx)
					}
					if err != nil {
						t.Errorf("name %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		full, err := srv.UsedMemory()
		require.NoError(t, err)
		keys, err := srv.Keys()
		require.NoError(t, err)
		if len(keys) != names {
			t.Errorf("%d keys with %d idle names; want one hash each", len(keys), names)
		}
		srv.WaitKeysGone(t, 10*time.Second+2*idle, func(string) bool { return true })
		t.Logf("used_memory: %d bytes before, %d with %d idle names (%d per name)", before, full, names, (full-before)/names)
	})
}

// TestMemoryDeadHoldersAndWaiters: the permits of holders that died, the
// tickets of waiters that died without leaving, and the records of
// abandoned claims all expire on their own.
func TestMemoryDeadHoldersAndWaiters(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	lossy := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1})
	ln := goredis.New(lossy)
	t.Cleanup(func() {
		_ = ln.Close()
		_ = lossy.Close()
	})
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	const ttl, idle = 300 * time.Millisecond, time.Second
	s := newSemaphore(t, n, option.TTL(ttl), option.IdleTTL(idle))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Holders that die: 50 names, 3 permits each, never released.
	for i := range 50 {
		for range 3 {
			_, err := s.TryAcquire(ctx, "dead:"+strconv.Itoa(i), 3)
			require.NoError(t, err)
		}
	}
	// Waiters that die: tickets left in the queues of 20 of those names.
	for i := range 20 {
		ghost(t, n, "dead:"+strconv.Itoa(i), "0123456789abcdef0123456789abcde"+strconv.Itoa(i%10), "60000", 1000)
	}
	// Claims abandoned: their replies lost.
	lk := newSemaphore(t, ln, option.TTL(ttl), option.IdleTTL(idle))
	for range 2 { // load the scripts: claim, release, abandon
		if l, err := lk.TryAcquire(ctx, "lossy", 2); err == nil {
			_ = l.Release(ctx)
		}
		d.Drop(0, 1)
		if l, err := lk.TryAcquire(ctx, "lossy", 2); err == nil {
			_ = l.Release(ctx)
		}
	}
	for range 10 {
		d.Drop(0, 1)
		if l, err := lk.TryAcquire(ctx, "lossy", 2); err == nil {
			_ = l.Release(ctx)
			t.Fatal("TryAcquire with its reply lost: granted")
		}
	}
	if v, err := srv.Do("ZCARD", permits.HashKey("lossy")+":gone"); err != nil || v == "0" {
		t.Fatalf("ZCARD of the gone records = %s, %v; want the abandoned claims", v, err)
	}
	keys, err := srv.Keys()
	require.NoError(t, err)
	t.Logf("%d keys with dead holders, dead waiters and abandoned claims", len(keys))
	// Holders' keys last at most 1.5 × TTL, tickets their deadline, gone
	// records max(10 s, 2 × TTL), hashes 1.5 × (TTL + idle TTL).
	start := time.Now()
	srv.WaitKeysGone(t, 15*time.Second, func(k string) bool { return strings.HasPrefix(k, "dlock:permits:") })
	t.Logf("every key gone %v after the last of them", time.Since(start))
}
