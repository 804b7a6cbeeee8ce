package single_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
)

type acquired struct {
	l   *lease.Lease
	err error
}

// TestAcquireRetriesThroughRestart: a waiter whose attempts fail while the
// server is down (killed, then restarted without the holder's lease) keeps
// trying, and gets the lock once the server is back.
func TestAcquireRetriesThroughRestart(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		a, b := newLocker(t, n), newLocker(t, n)
		const key = "restart"
		_, err := a.TryAcquire(ctx, key, option.TTL(time.Second))
		require.NoError(t, err)
		got := make(chan acquired, 1)
		go func() {
			l, err := b.Acquire(ctx, key, option.Retry(20*time.Millisecond, 50*time.Millisecond))
			got <- acquired{l, err}
		}()
		waitQueued(t, srv, key, 1)
		srv.Kill()
		time.Sleep(300 * time.Millisecond) // several attempts fail meanwhile
		srv.Restart()
		r := <-got
		if r.err != nil {
			t.Fatalf("Acquire across the restart: %v; want the lock", r.err)
		}
		if got := field(t, srv, key, "owner"); got != r.l.Owner() {
			t.Fatalf("owner = %q; want the waiter's %q", got, r.l.Owner())
		}
		require.NoError(t, r.l.Release(ctx))
	})
}

// TestAcquireRetriesLostReply: claims that land while their replies are
// lost (a client read timeout shorter than the link's delay) are
// abandoned, and the abandoned owner is refused from then on; Acquire
// tries again under a new owner and gets the lock once replies get
// through. go-redis only: its ReadTimeout bounds each call without ending
// the caller's context.
func TestAcquireRetriesLostReply(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{
		Addr: proxy.Addr(), ReadTimeout: 250 * time.Millisecond, MaxRetries: -1,
		DisableIdentity: true,
	})
	n := goredis.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		_ = c.Close()
	})
	lk := newLocker(t, n)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "lost-reply"
	warm, err := lk.TryAcquire(ctx, key) // load the scripts
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	// And the abandon script, which a lost reply would not fall back to
	// EVAL for: an acquire whose WAIT is refused abandons its claim.
	_, err = srv.Do("ACL", "SETUSER", "nowait", "on", ">pw", "~*", "&*", "+@all", "-wait")
	require.NoError(t, err)
	nowait := newLocker(t, nodeAs(t, "go-redis", srv.Addr(), "nowait", "pw"), option.Replicas(1, time.Millisecond))
	if _, err := nowait.TryAcquire(ctx, "warm"); err == nil {
		t.Fatal("TryAcquire with WAIT denied: granted")
	}

	// Open and initialise connections while the link is fast: go-redis
	// greets each new one with HELLO, which would time out as well, and
	// the abandon must reach the server.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = c.Do(ctx, "BLPOP", "nothing", "0.05").Err() })
	}
	wg.Wait()
	// Replies three times the read timeout late: lost, with margin for a
	// loaded machine on both sides.
	proxy.SetLatency(750 * time.Millisecond)
	got := make(chan acquired, 1)
	go func() {
		l, err := lk.Acquire(ctx, key, option.Retry(20*time.Millisecond, 50*time.Millisecond))
		got <- acquired{l, err}
	}()
	// A liveness wait, generous for a loaded machine: the first lost
	// reply normally shows within about a second.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if gone, _ := srv.Do("ZCARD", "dlock:{"+key+"}:gone"); gone != "0" && gone != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no owner abandoned: no claim's reply was lost")
		}
	}
	proxy.SetLatency(0)
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after lost replies: %v; want the lock", r.err)
	}
	if got := field(t, srv, key, "owner"); got != r.l.Owner() {
		t.Fatalf("owner = %q; want the waiter's %q", got, r.l.Owner())
	}
	require.NoError(t, r.l.Release(ctx))
}
