package permits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// queued waits until name's queue holds want tickets.
func queued(t *testing.T, srv *redistest.Server, name string, want int) {
	t.Helper()
	key := permits.HashKey(name) + ":q"
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if v, err := srv.Do("ZCARD", key); err == nil && v == itoa(want) {
			return
		}
	}
	v, _ := srv.Do("ZCARD", key)
	t.Fatalf("%s tickets in %s's queue; want %d", v, name, want)
}

func itoa(i int) string { return fence.Token(i).String() }

type result struct {
	l   *lease.Lease
	err error
}

// TestQueueFIFO: waiters that queued one after another are granted in
// that order (tokens rise with the order of grants on one server), each
// by the release before it, while newcomers are refused.
func TestQueueFIFO(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const name, size, waiters = "fifo", 2, 5
		var held []*lease.Lease
		for range size {
			l, err := s.TryAcquire(ctx, name, size)
			require.NoError(t, err)
			held = append(held, l)
		}
		got := make([]chan result, waiters)
		for i := range waiters {
			got[i] = make(chan result, 1)
			go func() {
				// A slow retry: only a release's handoff serves it soon.
				l, err := s.Acquire(ctx, name, size, option.Retry(10*time.Second, 10*time.Second))
				got[i] <- result{l, err}
			}()
			queued(t, srv, name, i+1)
		}
		if _, err := s.TryAcquire(ctx, name, size); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("a newcomer with waiters queued: %v; want ErrTaken", err)
		}
		last := max(held[0].Token(), held[1].Token())
		for i := range waiters {
			require.NoError(t, held[i%size].Release(ctx), "release %d", i)
			r := <-got[i]
			require.NoError(t, r.err, "waiter %d", i)
			if r.l.Token() <= last {
				t.Fatalf("waiter %d granted token %d after %d; want FIFO order", i, r.l.Token(), last)
			}
			if want := permits.Slot(held[i%size]); permits.Slot(r.l) != want {
				t.Errorf("waiter %d in slot %d; want the released slot %d", i, permits.Slot(r.l), want)
			}
			last = r.l.Token()
			if i+1 < waiters {
				if _, err := s.TryAcquire(ctx, name, size); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("a newcomer while %d wait: %v; want ErrTaken", waiters-i-1, err)
				}
			}
			held[i%size] = r.l
		}
		for _, l := range held {
			require.NoError(t, l.Release(ctx))
		}
	})
}

// ghost joins name's queue by hand with a ticket of life ms, as a waiter
// would, and never comes back: a waiter that died.
func ghost(t *testing.T, n node.Node, name, owner, ttl string, life int) {
	t.Helper()
	r, err := n.Eval(t.Context(), permits.ClaimScript, []string{permits.HashKey(name)}, owner, "1", ttl, "60000", itoa(life))
	require.NoError(t, err)
	if len(r) != 3 || r.Int(1) == 0 {
		t.Fatalf("ghost's claim replied %v; want a place in the queue", r)
	}
}

// TestDeadWaiterBounded: a waiter that died holds the queue up no longer
// than its ticket's deadline. Handed a permit by a release, with a TTL of
// a minute, it holds it until that deadline only; the newcomer refused
// meanwhile is served after it.
func TestDeadWaiterBounded(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		const name = "ghosted"
		held, err := s.TryAcquire(ctx, name, 1)
		require.NoError(t, err)
		const g = "0123456789abcdef0123456789abcdef"
		ghost(t, n, name, g, "60000", 800)
		require.NoError(t, held.Release(ctx))
		if v, _ := srv.Do("HGET", permits.HashKey(name)+":s", g); v == "" {
			t.Fatal("the release did not hand the permit to the queue's head")
		}
		if _, err := s.TryAcquire(ctx, name, 1); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire while the head holds its handed permit: %v; want ErrTaken", err)
		}
		// Without the ticket's bound the ghost would hold the permit a
		// minute, past ctx.
		l, err := s.Acquire(ctx, name, 1)
		require.NoError(t, err, "Acquire behind a dead waiter")
		require.NoError(t, l.Release(ctx))

		// A dead waiter whose deadline passed before the permit came free
		// is skipped.
		held, err = s.TryAcquire(ctx, name, 1)
		require.NoError(t, err)
		ghost(t, n, name, g+"0", "60000", 100)
		time.Sleep(150 * time.Millisecond)
		require.NoError(t, held.Release(ctx))
		l, err = s.TryAcquire(ctx, name, 1)
		require.NoError(t, err, "TryAcquire with only an expired ticket queued")
		require.NoError(t, l.Release(ctx))
	})
}

// TestWakeOnRelease: a waiter whose retry delay is longer than its
// context is served by the release's handoff, with the released slot.
func TestWakeOnRelease(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx := t.Context()
		const name = "wake"
		held, err := s.TryAcquire(ctx, name, 1)
		require.NoError(t, err)
		got := make(chan result, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			l, err := s.Acquire(wctx, name, 1, option.Retry(10*time.Second, 10*time.Second))
			got <- result{l, err}
		}()
		queued(t, srv, name, 1)
		require.NoError(t, held.Release(ctx))
		r := <-got
		require.NoError(t, r.err, "Acquire: only the release's message could serve it in time")
		if r.l.Token() <= held.Token() || permits.Slot(r.l) != 0 {
			t.Fatalf("token %d slot %d; want above %d, slot 0", r.l.Token(), permits.Slot(r.l), held.Token())
		}
		require.NoError(t, r.l.Release(ctx))
	})
}

// TestHandoffHeardLate: a message granting a waiter a permit whose token
// is not above the attempts of the waiter's latest refusal is a grant made
// before that refusal, heard late; it has ended, and the waiter asks the
// server rather than take it. Each of the two messages here (a token far
// below, and the holder's own) costs the waiter one claim, which counts
// that it heard them; the real grant after them is taken.
func TestHandoffHeardLate(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		const name = "late"
		held, err := newSemaphore(t, n).TryAcquire(ctx, name, 1, option.TTL(time.Minute))
		require.NoError(t, err)
		cn := &redistest.Counter{Node: n, Script: permits.ClaimScript}
		s := newSemaphore(t, cn, option.TTL(time.Minute))
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := s.Acquire(ctx, name, 1, option.Retry(time.Minute, time.Minute))
			if err != nil {
				t.Errorf("Acquire: %v", err)
			}
			got <- l
		}()
		cn.Await(t, 2, nil) // refused, subscribed, refused again
		owner, err := srv.Do("ZRANGE", permits.HashKey(name)+":q", "0", "0")
		require.NoError(t, err)
		for i, token := range []string{"5", held.Token().String()} {
			_, err := srv.Do("PUBLISH", permits.HashKey(name)+":released", owner[:32]+" "+token+" 0")
			require.NoError(t, err)
			// Each message heard costs a claim.
			cn.Await(t, int32(3+i), func() {
				select {
				case l := <-got:
					t.Fatalf("a grant of token %s taken while the only permit is held: lease %d", token, l.Token())
				default:
				}
			})
		}
		require.NoError(t, held.Release(ctx))
		var l *lease.Lease
		select {
		case l = <-got:
		case <-ctx.Done():
			t.Fatal("the waiter was not handed the permit")
		}
		require.NotNil(t, l)
		defer l.Release(ctx)
		v, err := srv.Do("HGET", permits.HashKey(name)+":s", l.Owner())
		require.NoError(t, err)
		if l.Token() <= held.Token() || v != l.Token().String()+" 0" || holders(t, srv, name) != "1" {
			t.Errorf("granted token %d; the server's holder record %q, %s holders; want above %d, the one holder",
				l.Token(), v, holders(t, srv, name), held.Token())
		}
	})
}

// TestCancelledWaiterLeaves: a waiter whose context ends gives up its
// place, and leaves nothing in the queue.
func TestCancelledWaiterLeaves(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		const name = "leaves"
		held, err := s.TryAcquire(t.Context(), name, 1)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err = s.Acquire(ctx, name, 1)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("Acquire past its deadline: %v; want DeadlineExceeded and ErrTaken", err)
		}
		if v, _ := srv.Do("EXISTS", permits.HashKey(name)+":q", permits.HashKey(name)+":qx"); v != "0" {
			t.Fatalf("%s queue keys left by a waiter that gave up", v)
		}
		require.NoError(t, held.Release(t.Context()))
		if got := holders(t, srv, name); got != "0" {
			t.Fatalf("%s holders; want none", got)
		}
	})
}

// TestMixedN: a call is granted only while fewer than its own N permits
// are live, whatever N the holders had.
func TestMixedN(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx := t.Context()
		const name = "mixed"
		var ls []*lease.Lease
		for range 3 {
			l, err := s.TryAcquire(ctx, name, 4)
			require.NoError(t, err)
			ls = append(ls, l)
		}
		for _, small := range []int{1, 2, 3} {
			if _, err := s.TryAcquire(ctx, name, small); !errors.Is(err, lease.ErrTaken) {
				t.Errorf("TryAcquire(n=%d) with 3 live: %v; want ErrTaken", small, err)
			}
		}
		l, err := s.TryAcquire(ctx, name, 5)
		require.NoError(t, err, "TryAcquire(n=5) with 3 live")
		ls = append(ls, l)
		if _, err := s.TryAcquire(ctx, name, 4); !errors.Is(err, lease.ErrTaken) {
			t.Errorf("TryAcquire(n=4) with 4 live: %v; want ErrTaken", err)
		}
		for _, l := range ls {
			require.NoError(t, l.Release(ctx))
		}
	})
}
