package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

// queued waits until key's queue holds want tickets.
func queued(t *testing.T, srv *redistest.Server, key string, want int) {
	t.Helper()
	q := rwlock.KeyOf(key) + ":q"
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if v, err := srv.Do("ZCARD", q); err == nil && v == strconv.Itoa(want) {
			return
		}
	}
	v, _ := srv.Do("ZCARD", q)
	t.Fatalf("%s tickets in %s's queue; want %d", v, key, want)
}

// events records, in order, what the holders of a test did.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.got = append(e.got, s)
	e.mu.Unlock()
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// waiter is an Acquire or AcquireShared run in the background: its lease
// or error arrive on got, after "NAME granted" was recorded.
type waiter struct {
	name string
	got  chan result
}

type result struct {
	l   *lease.Lease
	err error
}

// slow is a retry policy whose delay outlasts the tests: only a
// published change or the lease in the way ending wakes such a waiter.
var slow = option.Retry(20*time.Second, 20*time.Second)

func start(ctx context.Context, ev *events, name string, f func(context.Context, string, ...option.Option) (*lease.Lease, error), key string) *waiter {
	w := &waiter{name: name, got: make(chan result, 1)}
	go func() {
		l, err := f(ctx, key, slow)
		if err == nil {
			ev.add(name + " granted")
		}
		w.got <- result{l, err}
	}()
	return w
}

func (w *waiter) wait(t *testing.T) *lease.Lease {
	t.Helper()
	r := <-w.got
	require.NoError(t, r.err, "%s", w.name)
	return r.l
}

// release records "NAME released" and releases l.
func release(t *testing.T, ev *events, name string, l *lease.Lease) {
	t.Helper()
	ev.add(name + " released")
	require.NoError(t, l.Release(t.Context()), "%s release", name)
}

// TestFIFO: one queue for readers and writers, first come first served.
// A writer queued behind readers enters before the readers that came
// after it; the readers queued behind a writer enter together, as soon as
// it is done, before the writer that came after them. The order is read
// off the events, not off timings: each waiter's grant can only follow
// the releases it waits for.
func TestFIFO(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const key = "fifo"
		var ev events
		r0, err := lk.TryAcquireShared(ctx, key)
		require.NoError(t, err)
		ev.add("r0 granted")
		// Queue: w1, r1, r2, w2, r3.
		w1 := start(ctx, &ev, "w1", lk.Acquire, key)
		queued(t, srv, key, 1)
		r1 := start(ctx, &ev, "r1", lk.AcquireShared, key)
		queued(t, srv, key, 2)
		r2 := start(ctx, &ev, "r2", lk.AcquireShared, key)
		queued(t, srv, key, 3)
		w2 := start(ctx, &ev, "w2", lk.Acquire, key)
		queued(t, srv, key, 4)
		r3 := start(ctx, &ev, "r3", lk.AcquireShared, key)
		queued(t, srv, key, 5)
		// Newcomers do not overtake: a reader would share with r0, but w1
		// waits.
		if _, err := lk.TryAcquireShared(ctx, key); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquireShared with a writer queued: %v; want ErrTaken", err)
		}
		if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire with waiters: %v; want ErrTaken", err)
		}

		release(t, &ev, "r0", r0)
		lw1 := w1.wait(t)
		release(t, &ev, "w1", lw1)
		lr1, lr2 := r1.wait(t), r2.wait(t)
		// r1 and r2 hold together; w2 waits for both, r3 for w2.
		if lr1.Token() <= lw1.Token() || lr2.Token() != lr1.Token() {
			t.Errorf("readers' tokens %d, %d; want one token, above w1's %d", lr1.Token(), lr2.Token(), lw1.Token())
		}
		release(t, &ev, "r1", lr1)
		release(t, &ev, "r2", lr2)
		lw2 := w2.wait(t)
		if lw2.Token() <= lr1.Token() {
			t.Errorf("w2's token %d; want above the readers' %d", lw2.Token(), lr1.Token())
		}
		release(t, &ev, "w2", lw2)
		lr3 := r3.wait(t)
		if lr3.Token() <= lw2.Token() {
			t.Errorf("r3's token %d; want above w2's %d", lr3.Token(), lw2.Token())
		}
		release(t, &ev, "r3", lr3)

		got := ev.list()
		pos := map[string]int{}
		for i, e := range got {
			pos[e] = i
		}
		for _, o := range [][2]string{
			{"r0 released", "w1 granted"},
			{"w1 released", "r1 granted"},
			{"w1 released", "r2 granted"},
			// Both readers were in before either left: they held together.
			{"r1 granted", "r2 released"},
			{"r2 granted", "r1 released"},
			{"r1 released", "w2 granted"},
			{"r2 released", "w2 granted"},
			{"w2 released", "r3 granted"},
		} {
			if pos[o[0]] >= pos[o[1]] {
				t.Errorf("%q came after %q; want before. Events: %q", o[0], o[1], got)
			}
		}
		noQueue(t, srv, key)
	})
}

func noQueue(t *testing.T, srv *redistest.Server, key string) {
	t.Helper()
	for _, s := range []string{":q", ":qd", ":qw"} {
		if v := do(t, srv, "EXISTS", rwlock.KeyOf(key)+s); v != "0" {
			t.Errorf("%s%s still exists", rwlock.KeyOf(key), s)
		}
	}
}

// ghost joins key's queue by hand, as a waiter of kind ("w" or "r") with a
// ticket of life ms, and never comes back: a waiter that died.
func ghost(t *testing.T, n node.Node, key, owner, kind string, life int) {
	t.Helper()
	r, err := n.Eval(t.Context(), rwlock.ClaimScript, []string{rwlock.KeyOf(key)}, owner, kind, "60000", "60000", strconv.Itoa(life))
	require.NoError(t, err)
	if len(r) != 2 || r.Int(1) == 0 {
		t.Fatalf("ghost's claim replied %v; want a place in the queue", r)
	}
}

// TestDeadWaiter: a waiter that died holds the others up until its
// ticket's deadline, and no longer. A dead writer ahead keeps readers
// out (though only readers hold the lock); a dead reader at the head
// keeps a writer out of a free lock.
func TestDeadWaiter(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for _, tc := range []struct{ ghost, holder string }{{"w", "r"}, {"r", "w"}} {
			key := "ghost-" + tc.ghost
			var held *lease.Lease
			var err error
			if tc.holder == "r" {
				held, err = lk.TryAcquireShared(ctx, key)
			} else {
				held, err = lk.TryAcquire(ctx, key)
			}
			require.NoError(t, err)
			const life = 600
			deadline := serverMs(t, srv) + life
			ghost(t, n, key, fmt.Sprintf("%032d", len(tc.ghost)), tc.ghost, life)
			if tc.holder == "w" {
				require.NoError(t, held.Release(ctx)) // the lock is free: the dead reader's turn
			}
			var l *lease.Lease
			if tc.ghost == "w" {
				l, err = lk.AcquireShared(ctx, key)
			} else {
				l, err = lk.Acquire(ctx, key)
			}
			require.NoError(t, err, "acquire behind a dead %s waiter", tc.ghost)
			if now := serverMs(t, srv); now < deadline {
				t.Errorf("dead %s waiter: granted at server ms %d, before its deadline %d", tc.ghost, now, deadline)
			}
			require.NoError(t, l.Release(ctx))
			if tc.holder == "r" {
				require.NoError(t, held.Release(ctx))
			}
			noQueue(t, srv, key)
		}
	})
}

// TestDeadHolder: a holder that died (its lease left to run out, never
// released) keeps the others out until its lease's end on the server, and
// no longer.
func TestDeadHolder(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		const ttl = 500 * time.Millisecond
		// A dead writer keeps a reader out; a dead reader a writer.
		for _, shared := range []bool{false, true} {
			key := "dead-" + strconv.FormatBool(shared)
			var dead *lease.Lease
			var err error
			// Read before the claim: the lease ends a TTL after its grant,
			// which is no earlier (a reading after the grant may come late
			// on a loaded machine, and ask too much).
			end := serverMs(t, srv) + ttl.Milliseconds() - 5
			if shared {
				dead, err = lk.TryAcquireShared(ctx, key, option.TTL(ttl))
			} else {
				dead, err = lk.TryAcquire(ctx, key, option.TTL(ttl))
			}
			require.NoError(t, err)
			var l *lease.Lease
			if shared {
				l, err = lk.Acquire(ctx, key, slow)
			} else {
				l, err = lk.AcquireShared(ctx, key, slow)
			}
			require.NoError(t, err, "acquire behind a dead holder (shared=%v)", shared)
			if now := serverMs(t, srv); now < end {
				t.Errorf("granted at server ms %d, before the dead holder's lease ended (%d)", now, end)
			}
			if l.Token() < dead.Token() {
				t.Errorf("token %d below the dead holder's %d", l.Token(), dead.Token())
			}
			require.NoError(t, l.Release(ctx))
		}
	})
}

// TestCancelledWaiterLeaves: a waiter whose context ends gives up its
// place, and the waiters behind it go on.
func TestCancelledWaiterLeaves(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		const key = "leave"
		r0, err := lk.TryAcquireShared(ctx, key)
		require.NoError(t, err)
		wctx, wcancel := context.WithCancel(ctx)
		var ev events
		w := start(wctx, &ev, "w", lk.Acquire, key)
		queued(t, srv, key, 1)
		r1 := start(ctx, &ev, "r1", lk.AcquireShared, key)
		queued(t, srv, key, 2)
		wcancel()
		if r := <-w.got; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v; want Canceled", r.err)
		}
		// The writer's leave wakes r1, who shares with r0.
		l := r1.wait(t)
		require.NoError(t, l.Release(ctx))
		require.NoError(t, r0.Release(ctx))
		noQueue(t, srv, key)
	})
}
