package quorum_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// serverMs reads s's clock in milliseconds, the unit of ticket deadlines.
func serverMs(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	f := strings.Split(do(t, s, "TIME"), "\n")
	require.Len(t, f, 2, "TIME")
	sec, err := strconv.ParseInt(f[0], 10, 64)
	require.NoError(t, err, "TIME")
	usec, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err, "TIME")
	return sec*1000 + usec/1000
}

// waiters returns the ids in key's queue on s, head first.
func waiters(t *testing.T, s *redistest.Server, key string) []string {
	t.Helper()
	out := do(t, s, "ZRANGE", "dlock:{"+key+"}:queue", "0", "-1")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// waitQueued waits until key's queue holds n tickets on every server.
func waitQueued(t *testing.T, srvs []*redistest.Server, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; i < len(srvs); {
		if len(waiters(t, srvs[i], key)) == n {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d: queue of %s holds %v; want %d tickets", i, key, waiters(t, srvs[i], key), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queueGoneWithin waits up to d for both keys of key's queue to be gone
// from every server, and fails with what is left after that.
func queueGoneWithin(t *testing.T, srvs []*redistest.Server, key string, d time.Duration) {
	t.Helper()
	q, dl := "dlock:{"+key+"}:queue", "dlock:{"+key+"}:queue:deadlines"
	deadline := time.Now().Add(d)
	for i := 0; i < len(srvs); {
		if do(t, srvs[i], "EXISTS", q, dl) == "0" {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d: queue %v (deadlines %q) left %v after the last waiter was served",
				i, waiters(t, srvs[i], key), do(t, srvs[i], "HGETALL", dl), d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdEverywhere acquires key until its lock is on every server: a node
// whose vote for the holder timed out has the lock free, and there a
// waiter's vote is granted instead of queued, so it holds no ticket.
func holdEverywhere(t *testing.T, lk *quorum.Locker, srvs []*redistest.Server, key string) *lease.Lease {
	t.Helper()
	ctx := t.Context()
	for range 20 {
		l, err := lk.TryAcquire(ctx, key)
		require.NoError(t, err, "TryAcquire")
		if len(lockKeysLeft(t, srvs, key)) == len(srvs) {
			return l
		}
		require.NoError(t, l.Release(ctx), "Release")
	}
	t.Fatalf("no lease on %s with its lock on all %d servers in 20 attempts", key, len(srvs))
	return nil
}

// ticketLife is engine.TicketLife of the default retry: how long a ticket
// outlives the attempt that refreshed it.
const ticketLife = 2 * time.Second

// TestQueueFIFOQuorum: Acquire calls that queued behind a holder, each on
// a Locker of its own (as processes would), are granted in the order they
// queued; a TryAcquire hammering the key meanwhile never jumps them. Once
// the last one has released, the queue is gone from every node within a
// ticket's life: a release returns once a majority let go, and the rest
// of it (the ticket's removal included) finishes in the background, while
// the queue's keys expire with their latest ticket anyway.
func TestQueueFIFOQuorum(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(5 * time.Second)}
		lk := newLocker(t, nodesOn(t, srvs, c), opts...)
		const key, n = "fifo", 5
		held := holdEverywhere(t, lk, srvs, key)

		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			order  []int
			served atomic.Int32
		)
		for i := range n {
			w := newLocker(t, nodesOn(t, srvs, c), opts...)
			wg.Go(func() {
				l, err := w.Acquire(ctx, key)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					served.Add(1)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				served.Add(1)
				time.Sleep(2 * time.Millisecond)
				if err := l.Release(ctx); err != nil {
					t.Errorf("waiter %d: Release: %v", i, err)
				}
			})
			waitQueued(t, srvs, key, i+1)
		}

		jumper := newLocker(t, nodesOn(t, srvs, c), opts...)
		var jumped []string
		stop := make(chan struct{})
		jumps := make(chan struct{})
		go func() {
			defer close(jumps)
			for tries := 0; tries < 5000; tries++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				l, err := jumper.TryAcquire(ctx, key)
				if err != nil {
					continue
				}
				// While the jumper holds the lock no waiter is granted:
				// one not yet served now was queued when it got it.
				if now := served.Load(); now < n {
					jumped = append(jumped, "granted with "+strconv.Itoa(int(now))+" of the waiters served")
				}
				_ = l.Release(ctx)
			}
		}()

		released := time.Now()
		require.NoError(t, held.Release(ctx), "Release")
		wg.Wait()
		// Each release hands the lock to the next waiter at once: a granted
		// waiter's ticket leaves with its lease, the next one is woken,
		// and nobody waits out a ticket's life.
		if took := time.Since(released); took > ticketLife {
			t.Errorf("%d waiters served in %v; want within a ticket's life (%v)", n, took, ticketLife)
		}
		close(stop)
		<-jumps
		if len(jumped) > 0 {
			t.Errorf("TryAcquire jumped the queue: %v", jumped)
		}
		if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("grant order %v; want 0..%d, the order of queueing", order, n-1)
		}
		queueGoneWithin(t, srvs, key, ticketLife+time.Second)
	})
}

// TestTryAcquireRespectsQueueQuorum: a free lock promised to the queue's
// head on every node is refused to TryAcquire, which does not queue, and
// granted once the head has left.
func TestTryAcquireRespectsQueueQuorum(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true))
		const key = "respect"
		for _, s := range srvs {
			// A head that is alive but has not attempted again yet.
			do(t, s, "ZADD", "dlock:{"+key+"}:queue", "1", "head")
			do(t, s, "HSET", "dlock:{"+key+"}:queue:deadlines", "head", strconv.FormatInt(serverMs(t, s)+60_000, 10))
		}
		l, err := lk.TryAcquire(ctx, key)
		var qe *quorum.Error
		if !errors.Is(err, lease.ErrTaken) || !errors.As(err, &qe) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("TryAcquire of a free lock promised to the head: %v; want ErrTaken with a *Error", err)
		}
		require.Empty(t, lockKeysLeft(t, srvs, key), "locks left by the refused TryAcquire")
		for i, s := range srvs {
			if got := waiters(t, s, key); !slices.Equal(got, []string{"head"}) {
				t.Fatalf("server %d: queue %v after TryAcquire; want [head]: TryAcquire does not queue", i, got)
			}
			do(t, s, "ZREM", "dlock:{"+key+"}:queue", "head")
		}
		l, err = lk.TryAcquire(ctx, key)
		require.NoError(t, err, "TryAcquire once the head left")
		require.NoError(t, l.Release(ctx), "Release")
	})
}

// TestQueueDeadWaiter: a waiter that vanished without leaving the queue
// (its process cut off from every node before its context ended, so its
// leave never arrived) holds up the waiter behind it until its ticket's
// deadline, not longer, and TryAcquire does not jump it meanwhile; its
// entry is gone from every node afterwards, and the whole queue once the
// live waiter released.
func TestQueueDeadWaiter(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(5 * time.Second)}
		lk := newLocker(t, nodesOn(t, srvs, c), opts...)
		const key = "dead"
		held := holdEverywhere(t, lk, srvs, key)

		// The dead waiter, behind proxies; a ticket life of 3 s (3 ×
		// Retry.Max) leaves room for the checks made before it ends.
		proxies := make([]*redistest.Proxy, len(srvs))
		nodes := make([]node.Node, len(srvs))
		for i, s := range srvs {
			proxies[i] = redistest.StartProxy(t, s.Addr())
			nodes[i] = redistest.NodeFor(t, c, proxies[i].Addr())
		}
		dead := newLocker(t, nodes, append(opts, option.Retry(5*time.Millisecond, time.Second))...)
		deadCtx, deadCancel := context.WithCancel(ctx)
		defer deadCancel()
		deadErr := make(chan error, 1)
		go func() {
			l, err := dead.Acquire(deadCtx, key)
			if err == nil {
				_ = l.Release(ctx)
			}
			deadErr <- err
		}()
		waitQueued(t, srvs, key, 1)
		deadID := waiters(t, srvs[0], key)[0]
		for _, p := range proxies {
			p.Cut()
		}
		deadCancel()
		select {
		case err := <-deadErr:
			require.ErrorIs(t, err, context.Canceled, "the dead waiter's Acquire")
		case <-time.After(5 * time.Second):
			t.Fatal("the dead waiter's Acquire did not return 5s after its context ended")
		}

		live := make(chan *lease.Lease, 1)
		go func() {
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				t.Errorf("live waiter: %v", err)
			}
			live <- l
		}()
		waitQueued(t, srvs, key, 2)
		deadlines := make([]int64, len(srvs))
		for i, s := range srvs {
			if got := waiters(t, s, key); len(got) != 2 || got[0] != deadID {
				t.Fatalf("server %d: queue %v; want the dead waiter %s at the head", i, got, deadID)
			}
			// A ticket reads 'deadline ttl n token owner' (lua/ticket.lua).
			tk, _, _ := strings.Cut(do(t, s, "HGET", "dlock:{"+key+"}:queue:deadlines", deadID), " ")
			d, err := strconv.ParseInt(tk, 10, 64)
			require.NoError(t, err, "the dead waiter's deadline on server %d", i)
			deadlines[i] = d
		}
		slices.Sort(deadlines)
		require.NoError(t, held.Release(ctx), "Release")

		// The lock is free and promised to the dead head.
		if l, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("TryAcquire with a dead waiter at the head: %v; want ErrTaken", err)
		}
		if now := serverMs(t, srvs[0]); now >= deadlines[0] {
			t.Fatalf("the TryAcquire check ended %d ms after the dead ticket's deadline: it showed nothing", now-deadlines[0])
		}

		var l *lease.Lease
		select {
		case l = <-live:
		case <-time.After(time.Duration(deadlines[2]-serverMs(t, srvs[0]))*time.Millisecond + 5*time.Second):
			t.Fatal("the live waiter was not granted 5 s after the dead ticket's deadline")
		}
		require.NotNil(t, l, "the live waiter's lease")
		granted := serverMs(t, srvs[0])
		defer func() { _ = l.Release(ctx) }()
		// Granted once a majority dropped the dead head (deadline ≤ now on
		// each node), and within a retry delay (200 ms) plus a node timeout
		// and some slack after the last deadline.
		const slack = 750 * time.Millisecond
		if granted < deadlines[len(srvs)/2] {
			t.Errorf("live waiter granted at %d, before a majority's deadlines %v of the dead head", granted, deadlines)
		}
		if late := granted - deadlines[2]; late > slack.Milliseconds() {
			t.Errorf("live waiter granted %d ms after the dead ticket's last deadline; want within %v", late, slack)
		}
		t.Logf("granted %d ms after the dead ticket's earliest deadline (deadlines span %d ms)",
			granted-deadlines[0], deadlines[2]-deadlines[0])
		// The majority that granted the lease dropped the dead head before
		// it voted; a node whose vote ran before its own deadline (they
		// span a few ms) may keep it until the next attempt there or the
		// queue's end, which the check after the release judges.
		var kept []int
		for i, s := range srvs {
			if slices.Contains(waiters(t, s, key), deadID) {
				kept = append(kept, i)
			}
		}
		if len(kept) > len(srvs)/2 {
			t.Fatalf("servers %v still queue the dead waiter %s after the grant; want it gone from a majority", kept, deadID)
		}
		require.NoError(t, l.Release(ctx), "Release")
		queueGoneWithin(t, srvs, key, ticketLife+time.Second)
	})
}

// TestQueueOwnTicketLapsed: a vote drops the heads of the queue whose
// ticket lapsed, but for its own waiter's. A waiter that votes is alive,
// and on a quorum its ticket may have lapsed on some nodes and not on
// others: dropping it there would have those nodes promise the lock to
// the waiter behind it, and the others to this one. So the head whose own
// ticket lapsed is granted, keeping its place, as the single-server
// queue's head is; any other vote drops it first. The same for a set's
// vote, on each lock's queue.
func TestQueueOwnTicketLapsed(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	for _, keys := range [][]string{{"own"}, {"own-a", "own-b"}} {
		for _, c := range []struct {
			owner, waiter, score string
			status               int64
			left                 []string // each queue afterwards
		}{
			{"o1", "w1", "1", quorum.StatusSet, []string{"w1", "w2"}},
			{"o2", "w2", "2", quorum.StatusSet, []string{"w2"}},
			{"o3", "w3", "3", quorum.StatusQueued, []string{"w2", "w3"}},
			{"o4", "", "0", quorum.StatusQueued, []string{"w2"}},
		} {
			// Each lock free, its queue w1 (its ticket lapsed a second
			// ago) then w2 (live for a minute).
			for _, k := range keys {
				q, dl := "dlock:{"+k+"}:queue", "dlock:{"+k+"}:queue:deadlines"
				ms := serverMs(t, srv)
				do(t, srv, "DEL", q, dl, "dlock:{"+k+"}:lock")
				do(t, srv, "ZADD", q, "1", "w1", "2", "w2")
				do(t, srv, "HSET", dl, "w1", strconv.FormatInt(ms-1000, 10), "w2", strconv.FormatInt(ms+60_000, 10))
			}
			st, err := quorum.Vote(ctx, n, c.owner, c.waiter, c.score, keys[0], keys[1:]...)
			require.NoError(t, err)
			if st != c.status {
				t.Errorf("%v: the vote of %s for waiter %q: status %d; want %d", keys, c.owner, c.waiter, st, c.status)
			}
			for _, k := range keys {
				if got := waiters(t, srv, k); !slices.Equal(got, c.left) {
					t.Errorf("%v: after the vote of %s for waiter %q, %s's queue is %v; want %v", keys, c.owner, c.waiter, k, got, c.left)
				}
			}
		}
	}
}
