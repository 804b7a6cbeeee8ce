package claims_test

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
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }

// forEachClient runs f once per client library, each against a fresh server.
func forEachClient(t *testing.T, f func(t *testing.T, srv *redistest.Server, n node.Node)) {
	t.Helper()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			f(t, srv, redistest.NodeFor(t, client, srv.Addr()))
		})
	}
}

func newQueue(t testing.TB, n node.Node, name string, opts ...option.Option) *claims.Queue {
	t.Helper()
	q, err := claims.New(n, name, opts...)
	require.NoError(t, err, "New")
	return q
}

// stats reads q's counts, failing t on an error.
func stats(t testing.TB, q *claims.Queue) claims.Stats {
	t.Helper()
	s, err := q.Stats(context.Background())
	require.NoError(t, err, "Stats")
	return s
}

// claim claims one item, failing t on an error.
func claim(t testing.TB, q *claims.Queue, opts ...option.Option) *claims.Claim {
	t.Helper()
	c, err := q.Claim(t.Context(), opts...)
	require.NoError(t, err, "Claim")
	return c
}

// wantStale checks err is a refusal matching lease.ErrNotHeld and
// fence.ErrStale with a *fence.StaleError of tokens got and highest.
func wantStale(t testing.TB, what string, err error, got, highest fence.Token) {
	t.Helper()
	var se *fence.StaleError
	if !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) ||
		se.Token != got || se.Highest != highest {
		t.Fatalf("%s: %v; want ErrNotHeld and *fence.StaleError{Token: %d, Highest: %d}", what, err, got, highest)
	}
}

func TestArgs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	for _, tt := range []struct {
		name string
		n    node.Node
		q    string
		opts []option.Option
		arg  string
	}{
		{"nil node", nil, "q", nil, "node"},
		{"empty name", n, "", nil, "name"},
		{"zero TTL", n, "q", []option.Option{option.TTL(-time.Second)}, "TTL"},
		{"TTL all drift", n, "q", []option.Option{option.TTL(3 * time.Millisecond)}, "TTL"},
		{"keep done", n, "q", []option.Option{option.KeepDone(time.Microsecond)}, "KeepDone"},
		{"drift factor", n, "q", []option.Option{option.DriftFactor(0.5)}, "DriftFactor"},
		{"TTL all drift at 0.4", n, "q", []option.Option{option.DriftFactor(0.4), option.TTL(4 * time.Millisecond)}, "TTL"},
		{"retry", n, "q", []option.Option{option.Retry(time.Second, time.Millisecond)}, "Retry"},
	} {
		_, err := claims.New(tt.n, tt.q, tt.opts...)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != tt.arg || !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: New = %v; want an *lease.ArgError for %q", tt.name, err, tt.arg)
		}
	}

	q := newQueue(t, n, "args")
	ctx := t.Context()
	for i, ids := range [][]string{{"ok", ""}, {"ok", strings.Repeat("x", claims.MaxID+1)}} {
		err := q.Add(ctx, ids...)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != "ids[1]" {
			t.Errorf("Add case %d: %v; want an *lease.ArgError for ids[1]", i, err)
		}
	}
	if s := stats(t, q); s != (claims.Stats{}) {
		t.Fatalf("after refused Adds: %+v; want nothing added", s)
	}
	require.NoError(t, q.Add(ctx, strings.Repeat("x", claims.MaxID)), "Add of a MaxID id")
	require.NoError(t, q.Add(ctx), "Add of nothing")
	var ae *lease.ArgError
	if _, err := q.Claim(ctx, option.TTL(-time.Second)); !errors.As(err, &ae) {
		t.Fatalf("Claim with a negative TTL: %v; want an *lease.ArgError", err)
	}
	if _, err := q.Claim(ctx, option.Metadata(strings.Repeat("m", lease.MaxMetadata+1))); !errors.As(err, &ae) {
		t.Fatalf("Claim with too much metadata: %v; want an *lease.ArgError", err)
	}
	if s := stats(t, q); s.Pending != 1 || s.Claimed != 0 {
		t.Fatalf("after refused Claims: %+v; want the item pending", s)
	}
}

// TestDriftFactor: a claim's validity is its TTL less the drift the queue
// sets aside (option.DriftFactor), counted from before the claim was sent.
func TestDriftFactor(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	for _, f := range []float64{0.01, 0.4} {
		q := newQueue(t, n, fmt.Sprint("drift-", f), option.TTL(time.Second), option.DriftFactor(f))
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x"))
		before := time.Now()
		c, err := q.Claim(ctx)
		require.NoError(t, err)
		most := time.Second - time.Duration(f*float64(time.Second)) - 2*time.Millisecond
		if got := time.Until(before.Add(most)); c.Lease().TTL() > got+time.Millisecond {
			t.Errorf("drift factor %v: validity %v; want at most %v", f, c.Lease().TTL(), got)
		}
		if f == 0.4 && c.Lease().TTL() < 400*time.Millisecond {
			t.Errorf("drift factor 0.4: validity %v; want about 598ms", c.Lease().TTL())
		}
		require.NoError(t, c.Complete(ctx))
	}
}

// TestFIFO: items are claimed in the order they were added, once each;
// a repeated Add changes nothing; an empty queue says so; a Retry puts the
// item at the back, and its next claim carries a larger token.
func TestFIFO(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "fifo")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "a", "b", "a", "c"))
		require.NoError(t, q.Add(ctx, "b", "a"))
		if s := stats(t, q); s != (claims.Stats{Pending: 3}) {
			t.Fatalf("after adding a, b, c with repeats: %+v; want 3 pending", s)
		}
		floor := fence.Token(time.Now().Add(-time.Minute).UnixMicro())
		var held []*claims.Claim
		for _, want := range []string{"a", "b", "c"} {
			c := claim(t, q)
			if c.ID() != want || c.Attempt() != 1 || c.Token() < floor || c.Lease().Token() != c.Token() || c.Lease().Key() != want {
				t.Fatalf("claim: id %q attempt %d token %d (lease: key %q token %d); want %q, 1, a token above %d",
					c.ID(), c.Attempt(), c.Token(), c.Lease().Key(), c.Lease().Token(), want, floor)
			}
			held = append(held, c)
		}
		require.NoError(t, q.Add(ctx, "a"), "Add of a claimed item")
		if _, err := q.Claim(ctx); !errors.Is(err, claims.ErrEmpty) {
			t.Fatalf("Claim with every item claimed: %v; want ErrEmpty", err)
		}
		if s := stats(t, q); s != (claims.Stats{Claimed: 3}) {
			t.Fatalf("with a, b, c claimed: %+v; want 3 claimed", s)
		}

		require.NoError(t, q.Add(ctx, "d"))
		require.NoError(t, held[0].Retry(ctx), "Retry a")
		require.NoError(t, held[0].Retry(ctx), "Retry a again")
		if err := held[0].Complete(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Complete after Retry: %v; want ErrNotHeld", err)
		}
		require.NoError(t, held[1].Complete(ctx), "Complete b")
		require.NoError(t, held[1].Complete(ctx), "Complete b again")
		if err := held[1].Retry(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Retry after Complete: %v; want ErrNotHeld", err)
		}
		if held[1].Lease().Err() == nil {
			t.Fatal("the lease of a completed claim still runs")
		}
		d, a := claim(t, q), claim(t, q)
		if d.ID() != "d" || a.ID() != "a" || a.Attempt() != 2 || a.Token() <= held[0].Token() {
			t.Fatalf("after Retry of a behind d: claimed %q then %q (attempt %d, token %d after %d); want d, then a at attempt 2 with a larger token",
				d.ID(), a.ID(), a.Attempt(), a.Token(), held[0].Token())
		}
		for _, c := range []*claims.Claim{d, a, held[2]} {
			require.NoError(t, c.Complete(ctx), "Complete %s", c.ID())
		}
		require.NoError(t, q.Add(ctx, "a", "b"), "Add of completed items")
		if s := stats(t, q); s != (claims.Stats{}) {
			t.Fatalf("after every item completed and added again: %+v; want an empty queue (done records keep them out)", s)
		}
		keys, err := srv.Keys()
		require.NoError(t, err)
		base := claims.Base(q)
		for _, k := range keys {
			if !strings.HasPrefix(k, base+":done:") && !strings.HasPrefix(k, base+":floor:") {
				t.Errorf("key %q left in an empty queue; want only done records and token floors", k)
			}
		}
	})
}

// TestPausedWorkerFenced: a worker paused past its lease, whose item went
// to another worker, is refused at Complete, Retry and Extend with the
// newer token, and changes nothing.
func TestPausedWorkerFenced(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "paused")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x", "y"))
		a := claim(t, q, option.TTL(100*time.Millisecond))
		<-a.Lease().Done() // a pauses past its lease
		// The lease ends earlier by the client's clock than by the server's,
		// which judges it: by the round trip and the drift taken off, more
		// than a fixed sleep covers on a loaded machine.
		require.Eventually(t, func() bool { return stats(t, q).Expired == 1 }, 5*time.Second, 5*time.Millisecond,
			"x's lease never ran out by the server's clock")
		b := claim(t, q) // y: the claim returned x to the back of the queue
		c := claim(t, q)
		if b.ID() != "y" || c.ID() != "x" || c.Attempt() != 2 {
			t.Fatalf("claims after x ran out: %q, then %q at attempt %d; want y, then x at attempt 2", b.ID(), c.ID(), c.Attempt())
		}
		wantStale(t, "Complete of the paused worker", a.Complete(ctx), a.Token(), c.Token())
		wantStale(t, "Retry of the paused worker", a.Retry(ctx), a.Token(), c.Token())
		if s := stats(t, q); s != (claims.Stats{Claimed: 2}) {
			t.Fatalf("after the refusals: %+v; want x and y claimed", s)
		}
		require.NoError(t, c.Complete(ctx), "Complete of x's holder")
		wantStale(t, "Complete of the paused worker after x was completed", a.Complete(ctx), a.Token(), c.Token())
		require.NoError(t, b.Complete(ctx))
	})
}

// TestLateCompleteWithoutNewerClaim: a Complete or Retry after the lease
// ran out is accepted while no other worker claimed the item, whether or
// not a claim has returned it to the queue yet; Extend never revives it.
func TestLateCompleteWithoutNewerClaim(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "late")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x", "y", "z"))
		short := option.TTL(100 * time.Millisecond)
		x, y := claim(t, q, short), claim(t, q, short)
		time.Sleep(200 * time.Millisecond)
		if err := x.Lease().Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Extend after the lease ran out: %v; want ErrNotHeld, not ErrStale", err)
		}
		if s := stats(t, q); s != (claims.Stats{Pending: 1, Claimed: 2, Expired: 2}) {
			t.Fatalf("with x and y run out: %+v; want 1 pending, 2 claimed and expired", s)
		}
		require.NoError(t, x.Complete(ctx), "Complete of x, run out, not returned yet")
		z := claim(t, q) // returns y to the queue, behind z
		if z.ID() != "z" {
			t.Fatalf("claimed %q; want z", z.ID())
		}
		if s := stats(t, q); s != (claims.Stats{Pending: 1, Claimed: 1}) {
			t.Fatalf("after the claim returned y: %+v; want y pending, z claimed", s)
		}
		require.NoError(t, y.Complete(ctx), "Complete of y, returned to the queue, not claimed since")
		if s := stats(t, q); s != (claims.Stats{Claimed: 1}) {
			t.Fatalf("after y's late Complete: %+v; want only z, claimed", s)
		}
		require.NoError(t, z.Retry(ctx))

		// A lease the server ended while its holder still counts it valid
		// (the server's clock ahead of the holder's, say) is not revived
		// by Extend; once another claim took the item, the refusal says so.
		q2 := newQueue(t, n, "late-extend", option.TTL(time.Minute))
		end := func(c *claims.Claim) {
			_, err := srv.Do("ZADD", claims.Base(q2)+":active", "XX", "1", c.ID())
			require.NoError(t, err)
		}
		require.NoError(t, q2.Add(ctx, "v"))
		v := claim(t, q2)
		end(v)
		v2 := claim(t, q2)
		if v2.ID() != "v" {
			t.Fatalf("claim after v's lease ended on the server: %q; want v", v2.ID())
		}
		wantStale(t, "Extend of a claim taken over", v.Lease().Extend(ctx, time.Minute), v.Token(), v2.Token())
		require.NoError(t, v2.Complete(ctx))
		require.NoError(t, q2.Add(ctx, "w"))
		w := claim(t, q2)
		end(w)
		if err := w.Lease().Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Extend after the lease ran out on the server: %v; want ErrNotHeld, not ErrStale", err)
		}
		require.NoError(t, w.Complete(ctx), "Complete after the refused Extend")

		z2 := claim(t, q, short)
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, z2.Retry(ctx), "Retry of z, run out, not returned yet")
		if s := stats(t, q); s != (claims.Stats{Pending: 1}) {
			t.Fatalf("after z's late Retry: %+v; want z pending", s)
		}
	})
}

// TestReapBounded: a claim returns at most 16 expired items to the queue
// before it takes one; the claims that follow return the rest.
func TestReapBounded(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "reap")
		ctx := t.Context()
		ids := make([]string, 40)
		for i := range ids {
			ids[i] = "item-" + strconv.Itoa(i)
		}
		require.NoError(t, q.Add(ctx, ids...))
		for range ids {
			claim(t, q, option.TTL(300*time.Millisecond))
		}
		time.Sleep(400 * time.Millisecond)
		first := claim(t, q)
		if first.Attempt() != 2 {
			t.Fatalf("first claim after every lease ran out: %q at attempt %d; want an item claimed before, at 2", first.ID(), first.Attempt())
		}
		if s := stats(t, q); s != (claims.Stats{Pending: 15, Claimed: 25, Expired: 24}) {
			t.Fatalf("after one claim: %+v; want 16 returned, one of them claimed: 15 pending, 25 claimed, 24 expired", s)
		}
		require.NoError(t, first.Complete(ctx))
		seen := map[string]bool{first.ID(): true}
		for range len(ids) - 1 {
			c := claim(t, q)
			if seen[c.ID()] {
				t.Fatalf("%q claimed again after it was completed", c.ID())
			}
			seen[c.ID()] = true
			require.NoError(t, c.Complete(ctx))
		}
		if s := stats(t, q); s != (claims.Stats{}) {
			t.Fatalf("after every item completed: %+v; want none", s)
		}
	})
}

// TestAutoRenew: a claim renewed in the background keeps its item past
// its TTL; completing it ends the lease.
func TestAutoRenew(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "renew")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x"))
		c := claim(t, q, option.TTL(time.Second), option.AutoRenew(true))
		time.Sleep(2500 * time.Millisecond)
		if _, err := q.Claim(ctx); !errors.Is(err, claims.ErrEmpty) {
			t.Fatalf("Claim while x is renewed: %v; want ErrEmpty", err)
		}
		if s := stats(t, q); s != (claims.Stats{Claimed: 1}) || c.Lease().Err() != nil {
			t.Fatalf("after 2.5 TTLs renewed: %+v, lease %v; want x claimed, not expired", s, c.Lease().Err())
		}
		require.NoError(t, c.Complete(ctx))
		<-c.Lease().Done()
		if !errors.Is(c.Lease().Err(), lease.ErrReleased) {
			t.Fatalf("lease after Complete: %v; want ErrReleased", c.Lease().Err())
		}
	})
}

// TestLeaseReleaseRetries: releasing a claim's lease returns the item to
// the queue, as Retry does.
func TestLeaseReleaseRetries(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "release")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x"))
		c := claim(t, q)
		require.NoError(t, c.Lease().Release(ctx))
		if s := stats(t, q); s != (claims.Stats{Pending: 1}) {
			t.Fatalf("after the lease's Release: %+v; want x pending", s)
		}
		again := claim(t, q)
		if again.ID() != "x" || again.Token() <= c.Token() {
			t.Fatalf("claim after Release: %q token %d; want x with a token above %d", again.ID(), again.Token(), c.Token())
		}
		require.NoError(t, again.Complete(ctx))
	})
}

// waitSubscribed waits until the server counts a subscriber on channel.
func waitSubscribed(t *testing.T, srv *redistest.Server, channel string) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		out, err := srv.Do("PUBSUB", "NUMSUB", channel)
		require.NoError(t, err)
		if out != channel+"\n0" {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("nobody subscribed to %s", channel)
		}
	}
}

// TestClaimWaitWakes: a waiting claimer is woken by an Add and by a Retry
// (its retry delay is a minute, so no poll does it), and by the end of
// the lease of an item nobody completes; when its context ends first, the
// error says so and that nothing was pending.
func TestClaimWaitWakes(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "wait")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		slow := option.Retry(time.Minute, time.Minute)
		channel := claims.Base(q) + ":ready"

		type result struct {
			c   *claims.Claim
			err error
		}
		wait := func() chan result {
			ch := make(chan result, 1)
			go func() {
				c, err := q.ClaimWait(ctx, slow)
				ch <- result{c, err}
			}()
			return ch
		}

		got := wait()
		waitSubscribed(t, srv, channel)
		require.NoError(t, q.Add(ctx, "x"))
		r := <-got
		require.NoError(t, r.err, "ClaimWait woken by Add")
		if r.c.ID() != "x" {
			t.Fatalf("ClaimWait woken by Add: %q; want x", r.c.ID())
		}

		got = wait()
		waitSubscribed(t, srv, channel)
		require.NoError(t, r.c.Retry(ctx))
		r2 := <-got
		require.NoError(t, r2.err, "ClaimWait woken by Retry")
		if r2.c.ID() != "x" || r2.c.Attempt() != 2 {
			t.Fatalf("ClaimWait woken by Retry: %q at attempt %d; want x at 2", r2.c.ID(), r2.c.Attempt())
		}
		require.NoError(t, r2.c.Complete(ctx))

		require.NoError(t, q.Add(ctx, "y"))
		claim(t, q, option.TTL(300*time.Millisecond)) // never completed
		r3 := <-wait()
		require.NoError(t, r3.err, "ClaimWait for an item whose lease runs out")
		if r3.c.ID() != "y" || r3.c.Attempt() != 2 {
			t.Fatalf("ClaimWait after y's lease ran out: %q at attempt %d; want y at 2", r3.c.ID(), r3.c.Attempt())
		}
		require.NoError(t, r3.c.Complete(ctx))

		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancelShort()
		if _, err := q.ClaimWait(short); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, claims.ErrEmpty) {
			t.Fatalf("ClaimWait on an empty queue until its deadline: %v; want DeadlineExceeded and ErrEmpty", err)
		}
	})
}

// TestManyWaiters: items added one by one to a queue that many claimers
// wait on go to one claimer each.
func TestManyWaiters(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "many")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const waiters = 8
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[string]int{}
		)
		for range waiters {
			wg.Go(func() {
				c, err := q.ClaimWait(ctx)
				if err != nil {
					t.Errorf("ClaimWait: %v", err)
					return
				}
				mu.Lock()
				seen[c.ID()]++
				mu.Unlock()
				if err := c.Complete(ctx); err != nil {
					t.Errorf("Complete: %v", err)
				}
			})
		}
		for i := range waiters {
			require.NoError(t, q.Add(ctx, "item-"+strconv.Itoa(i)))
		}
		wg.Wait()
		if len(seen) != waiters {
			t.Fatalf("claimed %v; want each of %d items once", seen, waiters)
		}
		for id, k := range seen {
			if k != 1 {
				t.Fatalf("%s claimed %d times", id, k)
			}
		}
	})
}

// TestAbandonedClaim: a claim whose caller gave up while it was on its way
// (the server paused) is given up once the server answers again: its item
// goes back to the front of the queue, and the same claim, landing late,
// is refused and changes nothing.
func TestAbandonedClaim(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		q := newQueue(t, n, "abandon")
		ctx := t.Context()
		require.NoError(t, q.Add(ctx, "x", "y"))
		if _, err := q.Stats(ctx); err != nil { // a warm connection
			t.Fatal(err)
		}
		srv.Pause()
		resumed := make(chan struct{})
		go func() {
			defer close(resumed)
			time.Sleep(300 * time.Millisecond)
			srv.Resume()
		}()
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := q.Claim(cctx)
		cancel()
		<-resumed
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Claim cut short by its deadline: %v; want DeadlineExceeded", err)
		}
		if s := stats(t, q); s != (claims.Stats{Pending: 2}) {
			t.Fatalf("after the abandoned claim: %+v; want x and y pending", s)
		}
		gone, err := srv.Do("ZRANGE", claims.Base(q)+":gone", "0", "-1")
		require.NoError(t, err)
		if gone == "" || strings.Contains(gone, "\n") {
			t.Fatalf("gone records %q; want the abandoned owner", gone)
		}
		r, err := n.Eval(ctx, claims.ClaimScript, []string{claims.Base(q)}, gone, "60000")
		if err != nil || len(r) != 1 || r.Int(0) != -2 {
			t.Fatalf("the abandoned claim landing late: %v, %v; want -2", r, err)
		}
		c := claim(t, q)
		// The abandon may reach the server before the claim (on another
		// connection): the claim is then refused, and x never left.
		if c.ID() != "x" || c.Attempt() > 2 {
			t.Fatalf("claim after the abandon: %q at attempt %d; want x, at the front, at attempt 1 or 2", c.ID(), c.Attempt())
		}
		t.Logf("x claimed at attempt %d after the abandon", c.Attempt())
		require.NoError(t, c.Complete(ctx))
	})
}

// TestNameShapes: queues whose names hold braces keep apart from each
// other and from a lock's keys.
func TestNameShapes(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	ctx := t.Context()
	names := []string{"}", "a}b", "{a}", "a", "%7D"}
	for i, name := range names {
		require.NoError(t, newQueue(t, n, name).Add(ctx, "item-"+strconv.Itoa(i)))
	}
	for i, name := range names {
		c := claim(t, newQueue(t, n, name))
		if c.ID() != "item-"+strconv.Itoa(i) {
			t.Fatalf("queue %q: claimed %q; want item-%d", name, c.ID(), i)
		}
		require.NoError(t, c.Complete(ctx))
	}
}

// TestTokenPast2To53: an item whose counter a hand edit put past 2^53 is
// refused, not handed out with an inexact token, and stays pending where
// it was; ClaimWait returns the refusal at once.
func TestTokenPast2To53(t *testing.T) {
	srv := redistest.Start(t)
	q := newQueue(t, redistest.NodeFor(t, "valkey-go", srv.Addr()), "edited")
	ctx := t.Context()
	require.NoError(t, q.Add(ctx, "x", "y"))
	_, err := srv.Do("HSET", claims.Base(q), "x", "9007199254740991 1 someone")
	require.NoError(t, err)
	if _, err := q.Claim(ctx); err == nil || !strings.Contains(err.Error(), "DLTOKEN") {
		t.Fatalf("Claim of x: %v; want the DLTOKEN refusal", err)
	}
	if _, err := q.ClaimWait(ctx); err == nil || !strings.Contains(err.Error(), "DLTOKEN") {
		t.Fatalf("ClaimWait of x: %v; want the DLTOKEN refusal", err)
	}
	if first, err := srv.Do("ZRANGE", claims.Base(q)+":pending", "0", "0"); err != nil || first != "x" {
		t.Fatalf("front of the queue after the refusals: %q, %v; want x", first, err)
	}
}

// TestTokenFloorAcrossReAdd: an id completed, then added again once its
// done record lapsed, goes on from the token it was completed with, even
// when the server's clock stepped back an hour in between: the token floor
// the Complete left. With the floor kept for a millisecond only (the same
// run, a lapsed floor), the token starts over from the stepped-back clock,
// below the old one: the limit option.IdleTTL documents, and what shows this
// test can fail.
func TestTokenFloorAcrossReAdd(t *testing.T) {
	for _, tt := range []struct {
		name  string
		idle  time.Duration
		rises bool
	}{
		{"kept", 0, true},
		{"kept for ever", -1, true},
		{"lapsed", time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, clock := redistest.StartClocked(t)
			for _, client := range redistest.Clients {
				t.Run(client, func(t *testing.T) {
					clock.Reset()
					q := newQueue(t, redistest.NodeFor(t, client, srv.Addr()), "floor-"+client,
						option.KeepDone(time.Millisecond), option.IdleTTL(tt.idle))
					ctx := t.Context()
					require.NoError(t, q.Add(ctx, "job"))
					first := claim(t, q)
					require.NoError(t, first.Complete(ctx))
					time.Sleep(20 * time.Millisecond) // the done record lapses; a millisecond floor too
					// Reading the lapsed records deletes them: left alone, the step
					// back would bring them back to life.
					n, err := srv.Do("EXISTS", claims.Base(q)+":done:job", claims.Base(q)+":floor:job")
					require.NoError(t, err)
					if want := map[bool]string{true: "1", false: "0"}[tt.rises]; n != want {
						t.Fatalf("done and floor records 20ms after the Complete: %s alive; want %s", n, want)
					}
					clock.Jump(-time.Hour)
					require.NoError(t, q.Add(ctx, "job"))
					again := claim(t, q)
					if got := again.Token() > first.Token(); got != tt.rises {
						t.Fatalf("token after a Complete, an hour's step back and a new Add: %d, first %d; rises %v, want %v",
							again.Token(), first.Token(), got, tt.rises)
					}
					if n, err := srv.Do("EXISTS", claims.Base(q)+":floor:job"); err != nil || n != "0" {
						t.Fatalf("floor record after the id was claimed again: EXISTS %q, %v; want it taken into the entry", n, err)
					}
					require.NoError(t, again.Complete(ctx))
					pttl, err := srv.Do("PTTL", claims.Base(q)+":floor:job")
					require.NoError(t, err)
					switch ms, _ := strconv.ParseInt(pttl, 10, 64); {
					case tt.idle == 0 && (ms <= 0 || ms > settings.DefaultIdleTTL.Milliseconds()):
						t.Fatalf("floor record's PTTL %s; want it within the idle TTL %v", pttl, settings.DefaultIdleTTL)
					case tt.idle < 0 && ms != -1:
						t.Fatalf("floor record's PTTL %s; want -1, kept for ever", pttl)
					}
				})
			}
		})
	}
}
