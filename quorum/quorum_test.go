package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(examplemain.With(m, 3, "--appendonly", "yes", "--appendfsync", "always"))
}

// mixed builds a quorum whose nodes alternate between the client libraries.
const mixed = "mixed"

// forEachClient runs f once per client library, in parallel subtests.
func forEachClient(t *testing.T, f func(t *testing.T, client string)) {
	for _, c := range redistest.Clients {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			f(t, c)
		})
	}
}

func nodesOn(t *testing.T, srvs []*redistest.Server, client string) []node.Node {
	t.Helper()
	out := make([]node.Node, len(srvs))
	for i, s := range srvs {
		c := client
		if c == mixed {
			c = redistest.OpenClients[i%len(redistest.OpenClients)]
		}
		out[i] = redistest.NodeFor(t, c, s.Addr())
	}
	return out
}

// testNodeTimeout replaces the 50ms default: servers started by parallel
// tests under the race detector answer a first call on a new connection
// slower than that.
const testNodeTimeout = 250 * time.Millisecond

func newLocker(t *testing.T, nodes []node.Node, opts ...option.Option) *quorum.Locker {
	t.Helper()
	lk, err := quorum.New(nodes, append([]option.Option{option.NodeTimeout(testNodeTimeout)}, opts...)...)
	require.NoError(t, err, "New")
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

func do(t *testing.T, s *redistest.Server, args ...string) string {
	t.Helper()
	out, err := s.Do(args...)
	if err != nil && err.Error() != "redis: nil" {
		t.Fatalf("%s %v: %v", s.Addr(), args, err)
	}
	return out
}

// lockKeysLeft returns the servers (by index) still holding key's lock.
func lockKeysLeft(t *testing.T, srvs []*redistest.Server, key string, only ...int) []int {
	t.Helper()
	var left []int
	for i, s := range srvs {
		if len(only) > 0 && !slices.Contains(only, i) {
			continue
		}
		if do(t, s, "EXISTS", "dlock:{"+key+"}:lock") == "1" {
			left = append(left, i)
		}
	}
	return left
}

// eventuallyNoLock is lockKeysLeft after giving late answers up to a
// second to be undone.
func eventuallyNoLock(t *testing.T, srvs []*redistest.Server, key string, only ...int) []int {
	t.Helper()
	return noLockWithin(t, time.Second, srvs, key, only...)
}

// lockOnAll waits up to 2 s for key's lock to be on every server of srvs:
// an acquisition returns once a majority voted, and the rest of its votes
// (one answered NOSCRIPT, say, and its script is sent again) land later.
// A test that pauses, restarts or reads a node after an acquisition calls
// it first, so that a vote still on its way does not land in the fault.
func lockOnAll(t *testing.T, srvs []*redistest.Server, key string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := lockKeysLeft(t, srvs, key)
		if len(left) == len(srvs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %q on servers %v after 2 s; want all %d", key, left, len(srvs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noLockWithin is eventuallyNoLock waiting up to d.
func noLockWithin(t *testing.T, d time.Duration, srvs []*redistest.Server, key string, only ...int) []int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := lockKeysLeft(t, srvs, key, only...)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTokenFor(t *testing.T) {
	tests := []struct {
		max   int64
		times []int64
		want  int64
	}{
		{0, nil, 1},
		{41, nil, 42},
		{5, []int64{100}, 100},
		{5, []int64{300, 100, 200}, 200},
		{5, []int64{400, 100, 300, 200}, 200}, // even count: the lower middle
		{999, []int64{100, 200, 300}, 1000},
		{199, []int64{200, 100, 300}, 200},
		{200, []int64{200, 100, 300}, 201},
		{1 << 52, []int64{1_700_000_000_000_000, 1_700_000_000_000_001, 1}, 1<<52 + 1},
	}
	for _, tc := range tests {
		if got := quorum.TokenFor(tc.max, tc.times); got != tc.want {
			t.Errorf("TokenFor(%d, %v) = %d; want %d", tc.max, tc.times, got, tc.want)
		}
	}
}

func TestNewArgs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	cases := []struct {
		name  string
		nodes []node.Node
		opts  []option.Option
	}{
		{"no nodes", nil, nil},
		{"nil node", []node.Node{n, nil}, nil},
		{"node timeout vs TTL", []node.Node{n}, []option.Option{option.TTL(time.Second), option.NodeTimeout(500 * time.Millisecond)}},
		{"zero node timeout", []node.Node{n}, []option.Option{option.NodeTimeout(-1)}},
		{"negative TTL", []node.Node{n}, []option.Option{option.TTL(-time.Second)}},
		{"drift factor", []node.Node{n}, []option.Option{option.DriftFactor(0.7)}},
		{"TTL above max TTL", []node.Node{n}, []option.Option{option.TTL(2 * time.Second), option.MaxTTL(time.Second)}},
		{"retry", []node.Node{n}, []option.Option{option.Retry(time.Second, 0)}},
		// Sums past the largest Duration: the sit-out of the lost-data
		// guard (it turned negative: no node ever sat out), and the TTL
		// plus the idle TTL a fence counter is kept.
		{"max TTL overflows the sit-out", []node.Node{n}, []option.Option{option.MaxTTL(math.MaxInt64)}},
		{"TTL overflows the sit-out", []node.Node{n}, []option.Option{option.TTL(math.MaxInt64 - time.Hour)}},
		{"TTL plus idle TTL overflows", []node.Node{n}, []option.Option{option.TTL(math.MaxInt64 - time.Second), option.DurableNodes(true)}},
	}
	for _, tc := range cases {
		_, err := quorum.New(tc.nodes, tc.opts...)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: err = %v; want *lease.ArgError", tc.name, err)
		}
	}
	lk := newLocker(t, []node.Node{n}, option.TTL(time.Second), option.DurableNodes(true))
	ctx := t.Context()
	if _, err := lk.TryAcquire(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("empty key: err = %v; want ErrInvalid", err)
	}
	if _, err := lk.TryAcquire(ctx, "k", option.TTL(80*time.Millisecond)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TTL below twice the node timeout: err = %v; want ErrInvalid", err)
	}
	guarded := newLocker(t, []node.Node{n}, option.TTL(time.Second))
	if _, err := guarded.TryAcquire(ctx, "k", option.TTL(2*time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("TTL above max TTL: err = %v; want ErrInvalid", err)
	}
}

func TestAcquireExtendRelease(t *testing.T) {
	for _, c := range append(slices.Clone(redistest.Clients), mixed) {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			srvs := redistest.StartN(t, 5)
			lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
			ctx := t.Context()
			l, err := lk.TryAcquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if !l.Fenced() || l.Token() == 0 {
				t.Fatalf("token = %v, fenced %v; want a token", l.Token(), l.Fenced())
			}
			if ttl := l.TTL(); ttl <= 4*time.Second || ttl > 5*time.Second {
				t.Errorf("TTL() = %v; want just under 5s", ttl)
			}
			if got := lockKeysLeft(t, srvs, "k"); len(got) < 3 {
				t.Errorf("lock on servers %v; want at least a majority", got)
			}
			_, err = lk.TryAcquire(ctx, "k")
			var qe *quorum.Error
			if !errors.Is(err, lease.ErrTaken) || !errors.As(err, &qe) || qe.Got != 0 || qe.Needed != 3 {
				t.Fatalf("second TryAcquire: %v; want ErrTaken with a quorum.Error of 0/3", err)
			}
			t.Logf("taken: %v", err)
			if err := l.Extend(ctx, 8*time.Second); err != nil {
				t.Fatal(err)
			}
			extended := 0
			for _, s := range srvs {
				if pttl := do(t, s, "PTTL", "dlock:{k}:lock"); len(pttl) == 4 && pttl > "7000" {
					extended++
				}
			}
			if extended < 3 {
				t.Errorf("lock extended to about 8s on %d servers; want a majority", extended)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Release returns once a majority released; the rest follows.
			if got := eventuallyNoLock(t, srvs, "k"); len(got) != 0 {
				t.Errorf("lock left on %v after release", got)
			}
			l2, err := lk.TryAcquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if l2.Token() <= l.Token() {
				t.Errorf("token after release = %v; want > %v", l2.Token(), l.Token())
			}
			// The grant did not wait for the slowest nodes: let their SETs
			// land before deleting the lock, and its counter, behind l2's
			// back (as a flush would).
			time.Sleep(100 * time.Millisecond)
			for _, s := range srvs {
				do(t, s, "DEL", "dlock:{k}:lock", "dlock:{k}:fence")
			}
			if err := l2.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("release of a lock gone everywhere: %v; want ErrNotHeld", err)
			}
		})
	}
}

func TestWithoutTokens(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.Tokens(false), option.TTL(2*time.Second))
		l, err := lk.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		if l.Token() != 0 || l.Fenced() {
			t.Errorf("token %v fenced %v; want 0, false", l.Token(), l.Fenced())
		}
		if got := do(t, srvs[0], "EXISTS", "dlock:{k}:fence"); got != "0" {
			t.Errorf("fence counter written without tokens")
		}
		require.NoError(t, l.Release(t.Context()))
	})
}

// TestRaceOneWinner: 100 goroutines race for one lock. The variants run
// one after the other: under the race detector, 300 contenders on two
// cores starve each other's node calls.
func TestRaceOneWinner(t *testing.T) {
	for _, c := range append(slices.Clone(redistest.Clients), mixed) {
		t.Run(c, func(t *testing.T) {
			srvs := redistest.StartN(t, 5)
			lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(10*time.Second))
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
			defer cancel()
			var (
				mu      sync.Mutex
				winners []*lease.Lease
				wg      sync.WaitGroup
				lastErr atomic.Value
				once    sync.Once
			)
			start := make(chan struct{})
			began := time.Now()
			for range 100 {
				wg.Go(func() {
					<-start
					l, err := lk.Acquire(ctx, "race")
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
							t.Errorf("Acquire: %v; want the context's end", err)
						}
						lastErr.Store(err.Error()) // errors of several types: atomic.Value takes one
						return
					}
					mu.Lock()
					winners = append(winners, l)
					mu.Unlock()
					// The others keep trying for a while, then give up.
					once.Do(func() {
						t.Logf("first winner after %v", time.Since(began))
						time.AfterFunc(time.Second, cancel)
					})
				})
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("%d winners; want exactly 1 (a loser's error: %v)", len(winners), lastErr.Load())
			}
			require.NoError(t, winners[0].Release(t.Context()))
		})
	}
}

func TestTokensIncrease(t *testing.T) {
	for _, c := range append(slices.Clone(redistest.Clients), mixed) {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			srvs := redistest.StartN(t, 5)
			lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
			ctx := t.Context()
			var last fence.Token
			start := time.Now()
			const n = 1000
			for i := range n {
				// Acquire, not TryAcquire: a stall of the loaded test machine
				// may fail one attempt, which is retried.
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				l, err := lk.Acquire(actx, "seq")
				cancel()
				require.NoError(t, err, "acquisition %d", i)
				if l.Token() <= last {
					t.Fatalf("acquisition %d: token %v after %v; want strictly larger", i, l.Token(), last)
				}
				last = l.Token()
				require.NoError(t, l.Release(ctx), "release %d", i)
			}
			t.Logf("%d acquire+release on 5 nodes: %v each", n, time.Since(start)/n)
		})
	}
}

func TestTwoOfFiveDead(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(2*time.Second))
		srvs[1].Kill()
		srvs[3].Kill()
		ctx := t.Context()
		start := time.Now()
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("acquire with 2 of 5 dead: %v", time.Since(start))
		if err := l.Extend(ctx, 2*time.Second); err != nil {
			t.Fatalf("extend: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if left := eventuallyNoLock(t, srvs, "k", 0, 2, 4); len(left) != 0 {
			t.Errorf("lock left on %v", left)
		}
	})
}

func TestThreeOfFiveDead(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		const ttl = 2 * time.Second
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(ttl))
		dead := []int{0, 2, 3}
		for _, i := range dead {
			srvs[i].Kill()
		}
		start := time.Now()
		_, err := lk.TryAcquire(t.Context(), "k")
		elapsed := time.Since(start)
		t.Logf("failed after %v: %v", elapsed, err)
		var qe *quorum.Error
		if !errors.As(err, &qe) {
			t.Fatalf("err = %v; want *Error", err)
		}
		if errors.Is(err, lease.ErrTaken) {
			t.Errorf("dead nodes reported as taken: %v", err)
		}
		if qe.Got > 2 || qe.Needed != 3 {
			t.Errorf("got %d needed %d; want <= 2 of 3", qe.Got, qe.Needed)
		}
		for _, i := range dead {
			a := qe.Nodes[i]
			if a.Node != srvs[i].Addr() || (a.Kind != quorum.KindError && a.Kind != quorum.KindTimeout && a.Kind != quorum.KindNotAwaited) {
				t.Errorf("answer of dead node %s = %+v", srvs[i].Addr(), a)
			}
		}
		if !slices.Contains(qe.Failed(), srvs[0].Addr()) {
			t.Errorf("Failed() = %v; want it to name %s", qe.Failed(), srvs[0].Addr())
		}
		if elapsed >= ttl/2 {
			t.Errorf("failure took %v; want well under %v", elapsed, ttl/2)
		}
		// A living node that answered after the failure was decided is
		// released as soon as its answer comes.
		if left := eventuallyNoLock(t, srvs, "k", 1, 4); len(left) != 0 {
			t.Errorf("lock left on living servers %v", left)
		}
		// A wait that runs out on dead nodes is no lock taken.
		wctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err = lk.Acquire(wctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) || errors.Is(err, lease.ErrTaken) {
			t.Errorf("Acquire with 3 of 5 dead: %v; want a deadline and a quorum.Error, not ErrTaken", err)
		}
	})
}

func TestPausedNode(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		const ttl = time.Second
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(ttl))
		ctx := t.Context()
		// Connections are open before the pause, as in a running service.
		l, err := lk.TryAcquire(ctx, "warm")
		require.NoError(t, err)
		_ = l.Release(ctx)

		srvs[2].Pause()
		start := time.Now()
		l, err = lk.TryAcquire(ctx, "k")
		if err != nil {
			srvs[2].Resume()
			t.Fatal(err)
		}
		t.Logf("acquire with a paused node: %v", time.Since(start))
		if err := l.Extend(ctx, ttl); err != nil {
			t.Errorf("extend: %v", err)
		}
		start = time.Now()
		if err := l.Release(ctx); err != nil {
			t.Errorf("release: %v", err)
		}
		t.Logf("release with a paused node: %v", time.Since(start))
		srvs[2].Resume()
		time.Sleep(ttl + 200*time.Millisecond)
		if left := lockKeysLeft(t, srvs, "k"); len(left) != 0 {
			t.Errorf("stray lock on %v a TTL after SIGCONT", left)
		}
	})
}

func TestValidityExhausted(t *testing.T) {
	t.Parallel()
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		proxies := make([]*redistest.Proxy, len(srvs))
		nodes := make([]node.Node, len(srvs))
		for i, s := range srvs {
			proxies[i] = redistest.StartProxy(t, s.Addr())
			nodes[i] = redistest.NodeFor(t, c, proxies[i].Addr())
		}
		// Drift 0.49*6s+2ms = 2942ms leaves 3058ms for the two phases.
		// Phase 1 at 1600ms keeps ~1.4s of slack for a loaded machine
		// within the 2990ms node timeout (and go-redis's 3s read
		// timeout); the commit that follows is not waited for past the
		// 1458ms of validity left, and could not answer within it.
		const ttl = 6 * time.Second
		lk := newLocker(t, nodes, option.DurableNodes(true), option.TTL(ttl),
			option.DriftFactor(0.49), option.NodeTimeout(2990*time.Millisecond))
		ctx := t.Context()
		// Open the connections and load every script first, so each call
		// below is one round trip.
		for _, s := range srvs {
			for _, sc := range quorum.Scripts() {
				do(t, s, "SCRIPT", "LOAD", sc.Source())
			}
		}
		// Every connection open before the links slow down (see
		// redistest.WarmRounds).
		for range redistest.WarmRounds {
			l, err := lk.TryAcquire(ctx, "warm")
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
		}
		// And let the releases past the majority land.
		if left := eventuallyNoLock(t, srvs, "warm"); len(left) != 0 {
			t.Fatalf("warm-up lock left on %v", left)
		}
		for _, p := range proxies {
			p.SetLatency(1600 * time.Millisecond)
		}
		start := time.Now()
		_, err := lk.TryAcquire(ctx, "k")
		t.Logf("after %v: %v", time.Since(start), err)
		var qe *quorum.Error
		if !errors.As(err, &qe) || !errors.Is(err, quorum.ErrNoValidity) {
			t.Fatalf("err = %v; want a quorum.Error for lack of validity", err)
		}
		if qe.Got < qe.Needed {
			t.Errorf("Got = %d; want a majority to have said yes", qe.Got)
		}
		// The release crosses the same 1.6 s links: up to 3.5 s, still
		// well inside the 6 s TTL, so that only a release clears it.
		if left := noLockWithin(t, 3500*time.Millisecond, srvs, "k"); len(left) != 0 {
			t.Errorf("lock left on %v after the failed acquisition", left)
		}
	})
}

func TestForcedViolationTokens(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
		ctx := t.Context()
		a, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		// The lock vanishes behind a's back (expiry, clock jump, operator).
		for _, s := range srvs {
			do(t, s, "DEL", "dlock:{k}:lock")
		}
		b, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		if a.TTL() <= 0 || b.TTL() <= 0 {
			t.Fatalf("want both leases alive by their own clocks")
		}
		if b.Token() <= a.Token() {
			t.Fatalf("tokens %v then %v; want the second larger", a.Token(), b.Token())
		}
		var g fence.Guard
		require.NoError(t, g.Admit("resource", b.Token()))
		if err := g.Admit("resource", a.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale holder admitted: %v", err)
		}
		_ = b.Release(ctx)
		_ = a.Release(ctx)
	})
}

func TestAcquireWaitsForRelease(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(10*time.Second),
			option.Retry(time.Second, 2*time.Second))
		ctx := t.Context()
		a, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		got := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			l, err := lk.Acquire(ctx, "k")
			got <- time.Now()
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		released := time.Now()
		require.NoError(t, a.Release(ctx))
		wait := (<-got).Sub(released)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Logf("waiter held the lock %v after the release", wait)
		if wait > 500*time.Millisecond {
			t.Errorf("waiter took %v after the release; the published release should wake it (retry delay >= 500ms)", wait)
		}

		// A waiter whose context ends sees the deadline and the last quorum.Error.
		b, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		defer b.Release(ctx)
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = lk.Acquire(wctx, "k")
		var qe *quorum.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) || !errors.Is(err, lease.ErrTaken) {
			t.Errorf("err = %v; want a deadline, a quorum.Error and ErrTaken", err)
		}
	})
}

// TestWaiterBesideHungNode: with one of five servers stopped, a waiter
// gets the lock moments after its release: subscribing to releases on the
// stopped server holds up neither its attempts nor its return.
func TestWaiterBesideHungNode(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		// The default node timeout (600 ms for the default TTL), so a
		// stall behind the stopped server would show as seconds.
		lk, err := quorum.New(nodesOn(t, srvs, c), option.DurableNodes(true),
			option.Retry(2*time.Second, 3*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = lk.Close() })
		ctx := t.Context()
		a, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		srvs[4].Pause()
		t.Cleanup(srvs[4].Resume)
		got := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			l, err := lk.Acquire(ctx, "k")
			got <- time.Now()
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		released := time.Now()
		require.NoError(t, a.Release(ctx))
		t.Logf("release took %v", time.Since(released))
		wait := (<-got).Sub(released)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Logf("waiter returned with the lock %v after the release", wait)
		if wait > 1500*time.Millisecond {
			t.Errorf("waiter took %v after the release beside a stopped node; want well under 1.5s", wait)
		}
	})
}

// touch makes every node stamp its epoch (first contact), waits out the
// sit-out that follows, and then acquires until the nodes are repaired:
// the state of a deployment that has been up for one maximum TTL. It
// returns once every node of srvs is repaired.
func touch(t *testing.T, lk *quorum.Locker, srvs []*redistest.Server, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	for start := time.Now(); ; {
		_, err := lk.TryAcquire(ctx, "touch")
		var qe *quorum.Error
		if !errors.As(err, &qe) || qe.Got != 0 {
			t.Fatalf("TryAcquire on fresh nodes: %v; want refused as lost data", err)
		}
		lost := 0
		for _, a := range qe.Nodes {
			if a.Kind == quorum.KindOK || a.Kind == quorum.KindHeld {
				t.Fatalf("fresh node %s counted as %v", a.Node, a.Kind)
			}
			if a.Kind == quorum.KindSitsOut {
				lost++
			}
		}
		if lost > 0 {
			break
		}
		// A first call on a loaded machine may time out (scripts load).
		if time.Since(start) > 2*time.Second {
			t.Fatalf("no fresh node reported lost data: %v", err)
		}
	}
	time.Sleep(ttl + 100*time.Millisecond)
	// Attempts past the sit-out repair the nodes; each votes from the
	// attempt after its repair on. Nodes stamped by a later attempt than
	// the first sit out a little longer.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if l, err := lk.TryAcquire(ctx, "touch"); err == nil {
			_ = l.Release(ctx)
		}
		repaired := 0
		for _, s := range srvs {
			if r := do(t, s, "GET", "dlock:repaired"); r != "" && r == do(t, s, "GET", "dlock:epoch") {
				repaired++
			}
		}
		if repaired == len(srvs) {
			return
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("%d of %d nodes repaired 3s after the sit-out", repaired, len(srvs))
		}
	}
}

func TestLostDataGuard(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	forEachClient(t, func(t *testing.T, c string) {
		for _, guard := range []bool{true, false} {
			t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
				srvs := redistest.StartN(t, 5)
				opts := []option.Option{option.TTL(ttl)}
				if !guard {
					opts = append(opts, option.DurableNodes(true))
				}
				lk := newLocker(t, nodesOn(t, srvs, c), opts...)
				ctx := t.Context()
				if guard {
					touch(t, lk, srvs, ttl) // fresh nodes look like nodes that just lost their data
				}
				var aOpts []option.Option
				if !guard {
					// a must outlast the restarts and the clients' redials
					// (go-redis backs off after failed dials, seconds at worst).
					aOpts = append(aOpts, option.TTL(10*ttl))
				}
				a, err := lk.TryAcquire(ctx, "k", aOpts...)
				require.NoError(t, err)
				// a's votes not awaited must land before the restarts: one
				// still queued, or retried by the client, would set a's lock
				// on a restarted server and refuse b there for a's TTL.
				lockOnAll(t, srvs, "k")
				for _, i := range []int{0, 1, 2} {
					srvs[i].Restart() // SIGKILL, back without its data
				}
				restarted := time.Now()
				sawLost := false
				var b *lease.Lease
				for {
					b, err = lk.TryAcquire(ctx, "k")
					if err == nil {
						break
					}
					var qe *quorum.Error
					if !errors.As(err, &qe) {
						t.Fatalf("err = %v; want a quorum.Error", err)
					}
					for _, a := range qe.Nodes {
						sawLost = sawLost || a.Kind == quorum.KindSitsOut
					}
					if time.Since(restarted) > 8*ttl {
						t.Fatalf("still refused %v after the restart: %v", time.Since(restarted), err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				since := time.Since(restarted)
				if !guard {
					// Clients may need one call to notice the broken connections.
					if a.TTL() <= 0 {
						t.Fatalf("a expired before b acquired; the test shows nothing")
					}
					t.Logf("double grant without the guard, %v after the restart: a (token %v, %v left) and b (token %v)", since, a.Token(), a.TTL(), b.Token())
					return
				}
				t.Logf("granted %v after the restart; a token %v, b token %v", since, a.Token(), b.Token())
				if !sawLost {
					t.Errorf("no refusal named a node as lost data")
				}
				if since < ttl-50*time.Millisecond {
					t.Errorf("granted %v after the restart; want after the max TTL (%v)", since, ttl)
				}
				if b.Token() <= a.Token() {
					t.Errorf("token after repair %v; want > %v", b.Token(), a.Token())
				}
				_ = b.Release(ctx)
			})
		}
	})
}

// TestRepair: a token is committed on {0,1,2}; node 2 loses its data and
// is repaired by acquisitions of another key (the repair is node-wide);
// then nodes 0 and 1 die, and the next token goes through {2,3,4}, whose
// only overlap with the first majority is the restarted node. Counters set
// far above the clock floor make the floor useless, so only the repair can
// keep the order.
func TestRepair(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	const high = "4503599627370496" // 2^52
	forEachClient(t, func(t *testing.T, c string) {
		for _, guard := range []bool{true, false} {
			t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
				srvs := redistest.StartN(t, 5)
				opts := []option.Option{option.TTL(ttl)}
				if !guard {
					opts = append(opts, option.DurableNodes(true))
				}
				lk := newLocker(t, nodesOn(t, srvs, c), opts...)
				ctx := t.Context()
				if guard {
					touch(t, lk, srvs, ttl)
				}
				for _, i := range []int{0, 1, 2} {
					do(t, srvs[i], "SET", "dlock:{k}:fence", high)
				}
				for _, i := range []int{3, 4} {
					do(t, srvs[i], "SET", "dlock:{k}:lock", "someone-else", "PX", "60000")
				}
				a, err := lk.TryAcquire(ctx, "k")
				require.NoError(t, err)
				_ = a.Release(ctx)
				for _, i := range []int{3, 4} {
					do(t, srvs[i], "DEL", "dlock:{k}:lock")
				}
				srvs[2].Restart()
				restarted := time.Now()
				if guard {
					// Any key's acquisitions repair node 2 once it has sat out.
					for {
						if m := do(t, srvs[2], "GET", "dlock:repaired"); m != "" && m == do(t, srvs[2], "GET", "dlock:epoch") {
							break
						}
						if time.Since(restarted) > 3*ttl {
							t.Fatalf("node 2 not repaired %v after its restart", time.Since(restarted))
						}
						if l, err := lk.TryAcquire(ctx, "other"); err == nil {
							_ = l.Release(ctx)
						}
						time.Sleep(20 * time.Millisecond)
					}
					if since := time.Since(restarted); since < ttl-50*time.Millisecond {
						t.Errorf("repaired %v after the restart; want after the max TTL (%v)", since, ttl)
					}
					if f := do(t, srvs[2], "GET", "dlock:floor"); f != a.Token().String() {
						t.Errorf("floor of the repaired node = %q; want a's token %v, exactly", f, a.Token())
					}
				}
				srvs[0].Kill()
				srvs[1].Kill()
				var b *lease.Lease
				for {
					b, err = lk.TryAcquire(ctx, "k")
					if err == nil {
						break
					}
					if time.Since(restarted) > 3*ttl {
						t.Fatalf("still refused: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if !guard {
					t.Logf("without the guard: a %v, then b %v through {2,3,4}", a.Token(), b.Token())
					if b.Token() > a.Token() {
						t.Errorf("b's token %v exceeds a's %v: the test shows nothing", b.Token(), a.Token())
					}
					return
				}
				t.Logf("a %v, then b %v through {2,3,4}, %v after the restart", a.Token(), b.Token(), time.Since(restarted))
				if b.Token() <= a.Token() {
					t.Errorf("token through the repaired node %v; want > %v", b.Token(), a.Token())
				}
				_ = b.Release(ctx)
				c, err := lk.TryAcquire(ctx, "k")
				require.NoError(t, err)
				if c.Token() <= b.Token() {
					t.Errorf("token %v after %v; want larger", c.Token(), b.Token())
				}
				_ = c.Release(ctx)
			})
		}
	})
}

// TestGuardedTwoOfFiveDead: with the guard on and the nodes repaired, 2 of
// 5 dead leave every key acquirable: one never locked before, and one
// whose last commit majority lost two of its three nodes.
func TestGuardedTwoOfFiveDead(t *testing.T) {
	const ttl = time.Second
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(ttl))
		ctx := t.Context()
		touch(t, lk, srvs, ttl)
		for _, i := range []int{3, 4} {
			do(t, srvs[i], "SET", "dlock:{k}:lock", "someone-else", "PX", "60000")
		}
		a, err := lk.TryAcquire(ctx, "k") // committed on {0,1,2}
		require.NoError(t, err)
		_ = a.Release(ctx)
		for _, i := range []int{3, 4} {
			do(t, srvs[i], "DEL", "dlock:{k}:lock")
		}
		srvs[1].Kill()
		srvs[2].Kill()
		for _, key := range []string{"order-1", "order-2"} {
			l, err := lk.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("fresh key %s with 2 of 5 dead: %v", key, err)
			}
			_ = l.Release(ctx)
		}
		b, err := lk.TryAcquire(ctx, "k") // through {0,3,4}
		if err != nil {
			t.Fatalf("key k with 2 of its 3 committing nodes dead: %v", err)
		}
		if b.Token() <= a.Token() {
			t.Errorf("token %v after %v; want larger", b.Token(), a.Token())
		}
		_ = b.Release(ctx)
	})
}

// TestRepairNeedsOthers: a node that lost its data is not counted before
// its repair, and is repaired only by an attempt that hears from a
// majority of the other nodes.
func TestRepairNeedsOthers(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(ttl))
		ctx := t.Context()
		touch(t, lk, srvs, ttl)
		srvs[3].Pause()
		srvs[4].Pause()
		defer srvs[3].Resume()
		defer srvs[4].Resume()
		l, err := lk.TryAcquire(ctx, "order-1")
		require.NoError(t, err, "fresh key with 2 of 5 nodes away")
		_ = l.Release(ctx)

		srvs[0].Restart()
		restarted := time.Now()
		for {
			_, err := lk.TryAcquire(ctx, "order-2")
			var qe *quorum.Error
			if !errors.As(err, &qe) {
				t.Fatalf("err = %v; want a quorum.Error: nodes 1 and 2 alone are no majority", err)
			}
			if errors.Is(err, quorum.ErrNotRepaired) {
				if qe.Nodes[0].Kind != quorum.KindSitsOut {
					t.Errorf("node 0 answered %v; want lost data", qe.Nodes[0].Kind)
				}
				t.Logf("%v after the restart: %v", time.Since(restarted), err)
				break
			}
			if time.Since(restarted) > 3*ttl {
				t.Fatalf("node 0 never reported as not repaired: %v", err)
			}
		}
		// Two other nodes answer: too few to repair node 0.
		if r, e := do(t, srvs[0], "GET", "dlock:repaired"), do(t, srvs[0], "GET", "dlock:epoch"); r == e {
			t.Fatalf("node 0 repaired (mark %q) from 2 other nodes", r)
		}
		srvs[3].Resume()
		srvs[4].Resume()
		for start := time.Now(); ; {
			l, err := lk.TryAcquire(ctx, "order-2")
			if err == nil {
				_ = l.Release(ctx)
				break
			}
			if time.Since(start) > 3*ttl {
				t.Fatalf("still refused with all nodes back: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The grant may come before the repair it set off has landed.
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			r, e := do(t, srvs[0], "GET", "dlock:repaired"), do(t, srvs[0], "GET", "dlock:epoch")
			if r == e {
				break
			}
			if time.Since(start) > time.Second {
				t.Fatalf("node 0: mark %q, epoch %q; want repaired", r, e)
			}
		}
	})
}

func TestCanceledContext(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.DurableNodes(true), option.TTL(2*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire: %v; want context.Canceled", err)
	}
	if _, err := lk.Acquire(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire: %v; want context.Canceled", err)
	}
	// Close ends a waiting Acquire.
	held, err := lk.TryAcquire(t.Context(), "held")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := lk.Acquire(context.Background(), "held")
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_ = lk.Close()
	if err := <-waited; !errors.Is(err, quorum.ErrClosed) {
		t.Errorf("Acquire ended by Close: %v; want ErrClosed", err)
	}
	if err := held.Release(t.Context()); !errors.Is(err, quorum.ErrClosed) {
		t.Errorf("Release after Close: %v; want ErrClosed", err)
	}
	if _, err := lk.TryAcquire(t.Context(), "k"); !errors.Is(err, quorum.ErrClosed) {
		t.Errorf("after Close: %v; want ErrClosed", err)
	}
}

// TestGhostVote: a vote that timed out on a stopped server runs when the
// server resumes, possibly after the attempt's release reached it on
// another connection. The release records the owner as gone, so the late
// vote is refused and leaves no lock behind (it used to hold the node for
// a whole TTL under an owner that had given up).
func TestGhostVote(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srv := redistest.Start(t)
		n := redistest.NodeFor(t, c, srv.Addr())
		ctx := t.Context()
		st, err := quorum.GhostVote(ctx, n, "ghost", "owner-1")
		require.NoError(t, err)
		if st != quorum.StatusGone {
			t.Errorf("vote after its release: status %d; want %d (refused, owner gone)", st, quorum.StatusGone)
		}
		if v := do(t, srv, "GET", "dlock:{ghost}:lock"); v != "" {
			t.Errorf("lock left by the late vote: %q", v)
		}
	})
}

// TestLateVoteRefused: a vote that lands after its attempt's release (its
// owner recorded as gone) is refused with a short reply, which reads as a
// refusal with or without tokens, not as a malformed reply, and does not
// put its waiter back in the queue.
func TestLateVoteRefused(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		for _, mode := range []struct {
			name string
			opts []option.Option
		}{{"tokens", nil}, {"no tokens", []option.Option{option.Tokens(false)}}} {
			lk := newLocker(t, nodesOn(t, srvs, c), append(mode.opts, option.DurableNodes(true))...)
			answers, tickets, err := quorum.LateVotes(t.Context(), lk, "late")
			require.NoError(t, err, "%s", mode.name)
			for _, a := range answers {
				if a.Kind != quorum.KindHeld {
					t.Errorf("%s: %s answered %v (%v); want a refusal", mode.name, a.Node, a.Kind, a.Err)
				}
			}
			if tickets != 0 {
				t.Errorf("%s: the late votes queued their waiter on %d nodes", mode.name, tickets)
			}
		}
	})
}

// TestGhostVoteAfterSIGCONT stops three of five servers during an attempt,
// which then fails for want of votes and releases its owner everywhere;
// the stopped servers run the timed-out votes and the releases in whatever
// order after SIGCONT. No lock may be left on them, at once, not a TTL
// later.
func TestGhostVoteAfterSIGCONT(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		const ttl = 10 * time.Second
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(ttl))
		ctx := t.Context()
		for range 3 { // connections open before the pause, as in a running service
			l, err := lk.TryAcquire(ctx, "warm")
			require.NoError(t, err)
			_ = l.Release(ctx)
		}
		paused := srvs[2:]
		for _, s := range paused {
			s.Pause()
		}
		_, err := lk.TryAcquire(ctx, "ghost")
		var qe *quorum.Error
		if !errors.As(err, &qe) {
			for _, s := range paused {
				s.Resume()
			}
			t.Fatalf("TryAcquire with 3 of 5 stopped: %v; want a quorum.Error", err)
		}
		time.Sleep(2 * testNodeTimeout) // the releases are sent, in the background
		for _, s := range paused {
			s.Resume()
		}
		// Both the votes and the releases run within moments of SIGCONT.
		time.Sleep(500 * time.Millisecond)
		if left := lockKeysLeft(t, srvs, "ghost"); len(left) != 0 {
			t.Errorf("locks left by late votes on %v after SIGCONT", left)
		}
	})
}

// TestReleaseThenAcquireInOrder: a Release returns on a majority and
// finishes on the other nodes in the background; the next acquisition of
// the key by the same Locker must not overtake it on any node (the calls
// of one key keep their order per node), so no vote ever finds the
// released lease still holding the lock.
func TestReleaseThenAcquireInOrder(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		rec := &events.Recorder{}
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second),
			option.Observer(rec))
		ctx := t.Context()
		const rounds = 300
		taken := 0
		for range rounds {
			l, err := lk.TryAcquire(ctx, "k")
			require.NoError(t, err, "TryAcquire")
			require.NoError(t, l.Release(ctx), "Release")
			for _, e := range rec.Take() {
				if e.Kind == observe.Vote && e.Outcome == "taken" {
					taken++
				}
			}
		}
		if taken > 0 {
			t.Errorf("%d votes in %d rounds found the lock still held by the lease released before", taken, rounds)
		}
	})
}
