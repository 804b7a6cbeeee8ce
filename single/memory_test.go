package single_test

import (
	"context"
	"errors"
	"strconv"
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
	"github.com/dlockgo/dlock/single"
)

// What the single strategy keeps on the server for a key must be bounded
// by the key's live owners and waiters, or expire: these tests count it.

// lockKeys returns the server keys of the lock on key that exist, with
// their sizes in bytes.
func lockKeys(t *testing.T, srv *redistest.Server, key string) map[string]int64 {
	t.Helper()
	h := single.HashKey(key)
	out := map[string]int64{}
	for _, k := range []string{h, h + ":gone", h + ":q", h + ":qx"} {
		n, err := srv.MemoryUsage(k)
		require.NoError(t, err)
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

// maxHashBytes bounds the one hash a key keeps between leases (owner,
// until, attempts, as MEMORY USAGE counts a small hash: about 130 bytes).
const maxHashBytes = 256

// TestMemoryOneKey: thousands of lock+unlock of one key, blocking waiters
// among them, leave one small hash, set to expire, and nothing else.
func TestMemoryOneKey(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
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
					} else if l, err = lk.TryAcquire(ctx, key); errors.Is(err, lease.ErrTaken) {
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
		h := single.HashKey(key)
		if len(keys) != 1 || keys[h] == 0 || keys[h] > maxHashBytes {
			t.Fatalf("after %d lock+unlock: %v; want only the hash, at most %d bytes", workers*rounds, keys, maxHashBytes)
		}
		pttl, err := srv.Do("PTTL", h)
		require.NoError(t, err)
		// Claims move the hash's expiry only when it would fall short:
		// to 1.5 × (TTL + idle TTL) ahead.
		if ms, _ := strconv.ParseInt(pttl, 10, 64); ms <= settings.DefaultIdleTTL.Milliseconds() || ms > 3*(settings.DefaultTTL+settings.DefaultIdleTTL).Milliseconds()/2 {
			t.Errorf("the hash's PTTL = %s; want it past the idle TTL, within 1.5 × (TTL + idle TTL)", pttl)
		}
		t.Logf("after %d lock+unlock of one key: %v", workers*rounds, keys)
	})
}

// TestMemoryDistinctKeys: keys locked once (a lock per entity) leave
// nothing behind once their idle TTL has passed.
func TestMemoryDistinctKeys(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		const idle = 2 * time.Second
		lk := newLocker(t, n, option.TTL(time.Second), option.IdleTTL(idle))
		before, err := srv.UsedMemory()
		require.NoError(t, err)
		const keys = 5000
		redistest.LockOnce(t, lk, keys, 16, func(i int) string { return "order:" + strconv.Itoa(i) })
		full, err := srv.UsedMemory()
		require.NoError(t, err)
		srv.WaitKeysGone(t, 10*time.Second+2*idle, func(string) bool { return true })
		// The keys' bytes are freed at once; the tables that indexed them
		// shrink in the server's cron, and the allocator may keep pages:
		// most, not all, of what the keys took comes back.
		var after int64
		for shrink := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			after, err = srv.UsedMemory()
			require.NoError(t, err)
			if after-before <= (full-before)/2 || time.Since(shrink) > 5*time.Second {
				break
			}
		}
		t.Logf("used_memory: %d bytes before, %d with %d idle keys (%d per key), %d once they expired",
			before, full, keys, (full-before)/keys, after)
		if after-before > (full-before)/2 {
			t.Errorf("used_memory %d bytes above its start once every key expired; the keys took %d", after-before, full-before)
		}
	})
}

// TestMemoryGoneAndDeadWaiters: the records of abandoned claims and the
// tickets of waiters that died without leaving the queue expire on their
// own.
func TestMemoryGoneAndDeadWaiters(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	proxy := redistest.StartProxy(t, srv.Addr())
	lossy := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: -1})
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	ln, cn := goredis.New(lossy), goredis.New(cut)
	t.Cleanup(func() {
		_ = ln.Close()
		_ = cn.Close()
		_ = lossy.Close()
		_ = cut.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const key = "lossy"
	lk := newLocker(t, ln, option.TTL(time.Second))
	for range 2 { // load the scripts: claim, release, abandon
		if l, err := lk.TryAcquire(ctx, key); err == nil {
			_ = l.Release(ctx)
		}
		d.Drop(0, 1)
		if l, err := lk.TryAcquire(ctx, key); err == nil {
			_ = l.Release(ctx)
		}
	}
	const abandoned = 20
	for range abandoned {
		d.Drop(0, 1) // the claim's reply: the claim is abandoned
		if l, err := lk.TryAcquire(ctx, key); err == nil {
			_ = l.Release(ctx)
			t.Fatal("TryAcquire with its reply lost: granted")
		}
	}
	h := single.HashKey(key)
	if n, err := srv.Do("ZCARD", h+":gone"); err != nil || n == "0" {
		t.Fatalf("ZCARD of the gone records = %s, %v; want the abandoned claims", n, err)
	}

	// A waiter that dies: its link cut while it waits, it cannot leave.
	holder, err := newLocker(t, redistest.NodeFor(t, "go-redis", srv.Addr())).TryAcquire(ctx, key, option.TTL(10*time.Second))
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	waiter := newLocker(t, cn)
	go func() {
		time.Sleep(100 * time.Millisecond)
		proxy.Cut()
	}()
	_, err = waiter.Acquire(wctx, key, option.Retry(10*time.Millisecond, 20*time.Millisecond))
	wcancel()
	if err == nil {
		t.Fatal("waiter granted a held lock")
	}
	if n, _ := srv.Do("ZCARD", h+":q"); n != "1" {
		t.Fatalf("%s tickets in the queue; want the dead waiter's", n)
	}
	_ = holder.Release(ctx)

	// The gone records last max(10 s, 2 × TTL); a ticket, 2 s past its
	// waiter's last attempt.
	start := time.Now()
	for {
		keys := lockKeys(t, srv, key)
		delete(keys, h)
		if len(keys) == 0 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("left %v after the abandons and the dead waiter: %v", time.Since(start), keys)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("gone records and the dead waiter's ticket expired %v after the last of them", time.Since(start))
}
