package single_test

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
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// serverMs reads the server's clock in milliseconds.
func serverMs(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	out, err := srv.Do("TIME")
	require.NoError(t, err, "TIME")
	f := strings.Split(out, "\n")
	sec, _ := strconv.ParseInt(f[0], 10, 64)
	usec, _ := strconv.ParseInt(f[1], 10, 64)
	return sec*1000 + usec/1000
}

// queued returns the number of tickets in key's queue.
func queued(t *testing.T, srv *redistest.Server, key string) int {
	t.Helper()
	out, err := srv.Do("ZCARD", "dlock:{"+key+"}:q")
	require.NoError(t, err, "ZCARD")
	n, _ := strconv.Atoi(out)
	return n
}

// waitQueued waits until key's queue holds n tickets.
func waitQueued(t *testing.T, srv *redistest.Server, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for queued(t, srv, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue of %s holds %d tickets; want %d", key, queued(t, srv, key), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// noQueue fails unless both keys of key's queue are gone.
func noQueue(t *testing.T, srv *redistest.Server, key string) {
	t.Helper()
	if out, err := srv.Do("EXISTS", "dlock:{"+key+"}:q", "dlock:{"+key+"}:qx"); err != nil || out != "0" {
		t.Fatalf("EXISTS of the queue keys = %s, %v; want 0", out, err)
	}
	if out, err := srv.Do("HEXISTS", "dlock:{"+key+"}", "waiting"); err != nil || out != "0" {
		t.Fatalf("HEXISTS of the waiting count = %s, %v; want 0", out, err)
	}
}

// TestQueueFIFO: waiters that queued behind a holder get the lock in the
// order they queued, whatever order their wake-ups come in.
func TestQueueFIFO(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		lk := newLocker(t, n)
		const key, waiters = "fifo", 6
		held, err := lk.TryAcquire(ctx, key)
		require.NoError(t, err)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			order []int
		)
		for i := range waiters {
			wg.Go(func() {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := l.Release(ctx); err != nil {
					t.Errorf("waiter %d: Release: %v", i, err)
				}
			})
			waitQueued(t, srv, key, i+1)
		}
		if got := field(t, srv, key, "waiting"); got != strconv.Itoa(waiters) {
			t.Fatalf("waiting = %q; want %d", got, waiters)
		}
		waitSubscribed(t, srv, "dlock:{"+key+"}:released")
		require.NoError(t, held.Release(ctx))
		wg.Wait()
		for i, w := range order {
			if w != i {
				t.Fatalf("grant order %v; want 0..%d, the order of queueing", order, waiters-1)
			}
		}
		if len(order) != waiters {
			t.Fatalf("%d grants; want %d", len(order), waiters)
		}
		noQueue(t, srv, key)
	})
}

// TestTryAcquireRespectsQueue: a free lock kept for the queue's head is
// refused to a claim without a ticket, TryAcquire or an Acquire's first
// attempt, which then queues behind the head.
func TestTryAcquireRespectsQueue(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n)
		const key = "respect"
		// A head that is alive but has not claimed yet: its deadline is far.
		deadline := strconv.FormatInt(serverMs(t, srv)+60_000, 10)
		_, err := srv.Do("ZADD", "dlock:{"+key+"}:q", "1", "head")
		require.NoError(t, err)
		_, err = srv.Do("HSET", "dlock:{"+key+"}:qx", "head", deadline)
		require.NoError(t, err)
		_, err = srv.Do("HSET", "dlock:{"+key+"}", "waiting", "1")
		require.NoError(t, err)
		if l, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("TryAcquire of a free lock kept for the head: %v; want ErrTaken", err)
		}
		if got := queued(t, srv, key); got != 1 {
			t.Fatalf("%d tickets after TryAcquire; want 1: TryAcquire does not queue", got)
		}
		got := make(chan error, 1)
		go func() {
			l, err := lk.Acquire(ctx, key)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		waitQueued(t, srv, key, 2)
		select {
		case err := <-got:
			t.Fatalf("Acquire returned %v while the head has not claimed", err)
		case <-time.After(100 * time.Millisecond):
		}
		// The head gives up its place, as a cancelled waiter does.
		for _, cmd := range [][]string{
			{"ZREM", "dlock:{" + key + "}:q", "head"},
			{"HDEL", "dlock:{" + key + "}:qx", "head"},
			{"HINCRBY", "dlock:{" + key + "}", "waiting", "-1"},
			{"PUBLISH", "dlock:{" + key + "}:released", ""},
		} {
			_, err := srv.Do(cmd...)
			require.NoError(t, err, "%v", cmd)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("Acquire once at the head: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Acquire not granted once at the head")
		}
	})
}

// TestDeadWaiterExpires: a waiter that died at the head of the queue
// holds a free lock up until its ticket's deadline, no longer.
func TestDeadWaiterExpires(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		lk := newLocker(t, n)
		const key, life = "dead", 400
		deadline := serverMs(t, srv) + life
		_, err := srv.Do("ZADD", "dlock:{"+key+"}:q", "1", "ghost")
		require.NoError(t, err)
		_, err = srv.Do("HSET", "dlock:{"+key+"}:qx", "ghost", strconv.FormatInt(deadline, 10))
		require.NoError(t, err)
		_, err = srv.Do("HSET", "dlock:{"+key+"}", "waiting", "1")
		require.NoError(t, err)
		l, err := lk.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("Acquire behind a dead waiter: %v", err)
		}
		defer l.Release(ctx)
		// A ticket whose deadline is the server's ms now has run out (the
		// claim script drops it when deadline <= now), so a grant in the
		// deadline's own ms is on time.
		if now := serverMs(t, srv); now < deadline {
			t.Fatalf("granted at server ms %d, before the dead waiter's deadline %d", now, deadline)
		}
		noQueue(t, srv, key)
	})
}

// TestCancelledWaiterLeaves: a waiter whose context ends gives up its
// ticket, and the ticket it held lasted about the documented lifetime.
func TestCancelledWaiterLeaves(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		const key = "leave"
		held, err := lk.TryAcquire(t.Context(), key)
		require.NoError(t, err)
		defer held.Release(t.Context())
		for _, retry := range []settings.Pace{{}, {Min: time.Second, Max: time.Second}} {
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan error, 1)
			go func() {
				_, err := lk.Acquire(ctx, key, option.Retry(retry.Min, retry.Max))
				got <- err
			}()
			waitQueued(t, srv, key, 1)
			owner, err := srv.Do("ZRANGE", "dlock:{"+key+"}:q", "0", "0")
			require.NoError(t, err)
			d, err := srv.Do("HGET", "dlock:{"+key+"}:qx", owner)
			require.NoError(t, err)
			// A ticket reads "deadline TTL lifetime".
			f := strings.Fields(d)
			require.Len(t, f, 3, "ticket %q", d)
			dl, _ := strconv.ParseInt(f[0], 10, 64)
			want := max(2000, 3*retry.Max.Milliseconds())
			if left := dl - serverMs(t, srv); left > want || left < want-500 {
				t.Errorf("retry %v: ticket lasts %d ms more; want about %d", retry, left, want)
			}
			cancel()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Acquire: %v; want Canceled", err)
			}
			noQueue(t, srv, key)
		}
	})
}
