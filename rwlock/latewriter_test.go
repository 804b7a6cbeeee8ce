package rwlock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

// TestPausedWriterFencedByReaders: a writer paused past its lease, and
// followed by readers only, must not get its late write past a fence the
// readers have shown their token to. The first reader after a writer
// raises the counter, so the readers' token is above the writer's: the
// late write is refused, and the readers of that term still share one
// token.
func TestPausedWriterFencedByReaders(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		const key, res = "paused-writer", "doc-register"
		store := fence.NewStore(n)
		var guard fence.Guard

		w, err := lk.Acquire(ctx, key, option.TTL(200*time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, store.Put(ctx, res, "v1", w.Token()))
		require.NoError(t, guard.Admit(res, w.Token()))
		<-w.Done() // the writer is paused here, past its lease

		// Readers come: a blocking one (it waits out the writer's lease on
		// the server's clock), then one that joins it.
		r1, err := lk.AcquireShared(ctx, key, option.TTL(10*time.Second))
		require.NoError(t, err)
		r2, err := lk.TryAcquireShared(ctx, key, option.TTL(10*time.Second))
		require.NoError(t, err)
		if r1.Token() <= w.Token() {
			t.Errorf("readers' token %d after a writer whose lease ran out, with token %d; want above it", r1.Token(), w.Token())
		}
		if r2.Token() != r1.Token() {
			t.Errorf("second reader's token %d; want the term's %d, shared", r2.Token(), r1.Token())
		}
		// The readers read the register and act on what they read: the
		// fence sees their token.
		v, tok, _, err := store.Get(ctx, res)
		require.NoError(t, err)
		if v != "v1" || tok != w.Token() {
			t.Fatalf("register = %q under %d; want %q under %d", v, tok, "v1", w.Token())
		}
		require.NoError(t, guard.Admit(res, r1.Token()), "the readers at the guard")

		// The writer wakes and writes: refused while the readers hold.
		if err := guard.Admit(res, w.Token()); !errors.Is(err, fence.ErrStale) {
			t.Errorf("the paused writer's late write at the guard, readers holding: %v; want fence.ErrStale", err)
		}
		if err := w.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("the paused writer's Release: %v; want lease.ErrNotHeld", err)
		}
		require.NoError(t, r1.Release(ctx))
		require.NoError(t, r2.Release(ctx))

		// A writer that released in time: the readers after it are raised
		// above it too (a write of its may still be on its way to the
		// resource), and the next writer above them.
		w2, err := lk.Acquire(ctx, key)
		require.NoError(t, err)
		if w2.Token() <= r1.Token() {
			t.Errorf("writer after the readers: token %d; want above theirs, %d", w2.Token(), r1.Token())
		}
		require.NoError(t, w2.Release(ctx))
		r3, err := lk.AcquireShared(ctx, key)
		require.NoError(t, err)
		if r3.Token() <= w2.Token() {
			t.Errorf("reader after a released writer: token %d; want above the writer's %d", r3.Token(), w2.Token())
		}
		require.NoError(t, r3.Release(ctx))
		// Readers with no writer between them share the token, across
		// terms: nothing to tell apart.
		r4, err := lk.AcquireShared(ctx, key)
		require.NoError(t, err)
		if r4.Token() != r3.Token() {
			t.Errorf("reader after readers only: token %d; want theirs, %d", r4.Token(), r3.Token())
		}
		require.NoError(t, r4.Release(ctx))
	})
}

// TestReaderClaimRunTwice: the first reader after a writer raises the
// counter once, even when its claim runs twice (a client re-sends it after
// a lost reply): the second run finds it holding and returns the same
// token.
func TestReaderClaimRunTwice(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	lk := newLocker(t, n)
	ctx := t.Context()
	const key = "twice"
	w, err := lk.Acquire(ctx, key)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
	claim := func() fence.Token {
		t.Helper()
		r, err := n.Eval(ctx, rwlock.ClaimScript, []string{rwlock.KeyOf(key)}, "0123456789abcdef0123456789abcdef", "r", "60000", "60000")
		require.NoError(t, err)
		if len(r) != 1 {
			t.Fatalf("the reader's claim replied %v; want a token", r)
		}
		return fence.Token(r.Int(0))
	}
	first := claim()
	if first <= w.Token() {
		t.Fatalf("first reader's token %d; want above the writer's %d", first, w.Token())
	}
	if again := claim(); again != first {
		t.Fatalf("the same claim run again: token %d; want %d", again, first)
	}
	if got := do(t, srv, "HGET", rwlock.KeyOf(key), "attempts"); got != strconv.FormatUint(uint64(first), 10) {
		t.Fatalf("counter %s after the claim ran twice; want %d", got, first)
	}
}

// TestUnraisedPlant: plant.UnraisedReaders restores the rule before the
// raise, the gap the checkers must find: a reader after a writer whose
// lease ran out takes that writer's token. A Locker on the node as it is,
// on the same key, raises as ever.
func TestUnraisedPlant(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	ctx := t.Context()
	unraised, err := plant.UnraisedReaders()
	require.NoError(t, err)
	old := newLocker(t, plant.Swapping(n, unraised))
	const key = "unraised"
	w, err := old.Acquire(ctx, key, option.TTL(100*time.Millisecond))
	require.NoError(t, err)
	<-w.Done()
	r, err := old.AcquireShared(ctx, key)
	require.NoError(t, err)
	if r.Token() != w.Token() {
		t.Fatalf("planted reader's token %d; want the expired writer's %d (the old rule)", r.Token(), w.Token())
	}
	require.NoError(t, r.Release(ctx))
	w2, err := old.Acquire(ctx, key)
	require.NoError(t, err)
	require.NoError(t, w2.Release(ctx))
	r2, err := newLocker(t, n).AcquireShared(ctx, key)
	require.NoError(t, err)
	if r2.Token() <= w2.Token() {
		t.Fatalf("reader of a Locker without the plant: token %d; want above the writer's %d", r2.Token(), w2.Token())
	}
	require.NoError(t, r2.Release(ctx))
}

// TestReadersAfterRestart: a server restarted from a snapshot has lost
// the writers granted since it, and kept the counter the readers before
// them raised. The first reader on the new server process raises it again,
// floored at the clock, so its token is above the lost writer's, as the
// next writer's is: a fence that saw the lost writer's token admits the
// readers after the restart, and their order holds. (Before, readers
// shared the kept counter until the next writer came.)
func TestReadersAfterRestart(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithArgs("--save", "3600 1"))
			lk := newLocker(t, redistest.NodeFor(t, client, srv.Addr()))
			ctx := t.Context()
			const key = "restarted"

			r1, err := lk.AcquireShared(ctx, key)
			require.NoError(t, err)
			require.NoError(t, r1.Release(ctx))
			_, err = srv.Do("SAVE")
			require.NoError(t, err, "SAVE")
			w, err := lk.Acquire(ctx, key) // lost with the restart
			require.NoError(t, err)
			require.NoError(t, w.Release(ctx))
			srv.Restart()

			r2, err := lk.AcquireShared(ctx, key)
			require.NoError(t, err)
			if r2.Token() <= w.Token() {
				t.Errorf("reader after the restart: token %d; want above the lost writer's %d (the kept counter was %d)", r2.Token(), w.Token(), r1.Token())
			}
			r3, err := lk.TryAcquireShared(ctx, key)
			require.NoError(t, err)
			if r3.Token() != r2.Token() {
				t.Errorf("second reader after the restart: token %d; want the first's %d, shared", r3.Token(), r2.Token())
			}
			require.NoError(t, r2.Release(ctx))
			require.NoError(t, r3.Release(ctx))
		})
	}
}
