package rwlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// TestHistory: goroutines mix readers and writers on one key, blocking and
// trying, some leases left to run out instead of released. Each hold is
// recorded from its grant to the end of its validity by the holder's own
// clock, or to its release when that came first; no writer's interval may
// overlap any other holder's. Writers' tokens rise in the order of their
// grants, and each reader's token is above that of the writer granted last
// before it, and shared with the readers since that writer.
func TestHistory(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		const key, workers, rounds = "history", 8, 40
		var (
			mu    sync.Mutex
			holds []safety.Hold
			toks  []tokenAt
			wg    sync.WaitGroup
		)
		for g := range workers {
			wg.Go(func() {
				for i := range rounds {
					shared := (g+i)%3 != 0
					opts := []option.Option{option.TTL(time.Second)}
					if i%10 == 9 {
						opts = []option.Option{option.TTL(60 * time.Millisecond)} // left to run out
					}
					var (
						l   *lease.Lease
						err error
					)
					switch {
					case i%4 == 3 && shared:
						l, err = lk.TryAcquireShared(ctx, key, opts...)
					case i%4 == 3:
						l, err = lk.TryAcquire(ctx, key, opts...)
					case shared:
						l, err = lk.AcquireShared(ctx, key, opts...)
					default:
						l, err = lk.Acquire(ctx, key, opts...)
					}
					if errors.Is(err, lease.ErrTaken) && i%4 == 3 {
						continue
					}
					if err != nil {
						t.Errorf("worker %d round %d: %v", g, i, err)
						return
					}
					at := time.Now()
					until := at.Add(l.TTL())
					mu.Lock()
					toks = append(toks, tokenAt{shared, l.Token(), at})
					mu.Unlock()
					if i%10 != 9 {
						time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
						if now := time.Now(); now.Before(until) {
							until = now
						}
						if err := l.Release(ctx); err != nil {
							t.Errorf("worker %d round %d: release: %v", g, i, err)
						}
					}
					mu.Lock()
					holds = append(holds, safety.Hold{Holder: l.Owner(), Shared: shared, At: at, Until: until})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		var writers, readers int
		for _, h := range holds {
			if h.Shared {
				readers++
			} else {
				writers++
			}
		}
		if writers < workers || readers < workers {
			t.Fatalf("%d writers and %d readers held; want both kinds", writers, readers)
		}
		if vs := safety.CheckShared(holds); len(vs) > 0 {
			t.Fatalf("%d violations among %d holds, e.g. %v", len(vs), len(holds), vs[0])
		}
		checkTokens(t, toks)
		t.Logf("%d holds (%d writers, %d readers), none overlapping a writer", len(holds), writers, readers)
	})
}

type tokenAt struct {
	shared bool
	token  fence.Token
	at     time.Time
}

// checkTokens checks the tokens of grants, each seen at a time between
// its grant and its release: every token is at least the one before it,
// writers' strictly above every earlier token, and the readers after a
// writer share one token, strictly above that writer's. Holds of a writer
// and any other holder do not overlap (TestHistory checks that first), so
// those times order them as the server did.
func checkTokens(t *testing.T, toks []tokenAt) {
	t.Helper()
	toks = slices.Clone(toks)
	slices.SortFunc(toks, func(a, b tokenAt) int { return a.at.Compare(b.at) })
	var last, readers fence.Token // the latest token, and the readers' since the last writer (0: none yet)
	for _, k := range toks {
		switch {
		case !k.shared && k.token <= last:
			t.Fatalf("writer token %d granted after %d; want strictly rising", k.token, last)
		case !k.shared:
			last, readers = k.token, 0
		case readers == 0 && k.token <= last:
			t.Fatalf("first reader's token %d after token %d; want above it", k.token, last)
		case readers == 0:
			last, readers = k.token, k.token
		case k.token != readers:
			t.Fatalf("reader token %d; want the readers' %d since the last writer", k.token, readers)
		}
	}
}

// TestTokens: writers' tokens strictly rise; the readers after a writer
// share a token above it; a reader paused past a newer writer's grant is
// refused by the fence once that writer wrote.
func TestTokens(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		const key = "tokens"
		// Before any writer, the readers' token is the counter a reader
		// starts, and the first writer's is above it.
		r, err := lk.TryAcquireShared(ctx, key)
		require.NoError(t, err)
		if r.Token() == 0 {
			t.Fatal("a reader's token is 0 with no writer yet; want the counter started")
		}
		require.NoError(t, r.Release(ctx))
		last := r.Token()
		readers := r.Token() // the readers' token since the last writer; 0 after a writer
		for i := range 60 {
			if i%3 == 0 {
				w, err := lk.Acquire(ctx, key)
				require.NoError(t, err)
				if w.Token() <= last {
					t.Fatalf("writer %d: token %d after %d; want strictly rising", i, w.Token(), last)
				}
				last, readers = w.Token(), 0
				require.NoError(t, w.Release(ctx))
				continue
			}
			r, err := lk.AcquireShared(ctx, key)
			require.NoError(t, err)
			switch {
			case readers == 0 && r.Token() <= last:
				t.Fatalf("reader %d, the first after a writer: token %d; want above the writer's %d", i, r.Token(), last)
			case readers == 0:
				last, readers = r.Token(), r.Token()
			case r.Token() != readers:
				t.Fatalf("reader %d: token %d; want the readers' %d, shared", i, r.Token(), readers)
			}
			require.NoError(t, r.Release(ctx))
		}

		// The fence: w1 writes; a reader reads under w1's token, and is
		// paused past its lease; w2 is granted and writes; the reader's
		// late act under its token is refused.
		store := fence.NewStore(n)
		var guard fence.Guard
		const res = "doc-register"
		w1, err := lk.Acquire(ctx, key)
		require.NoError(t, err)
		require.NoError(t, store.Put(ctx, res, "v1", w1.Token()))
		require.NoError(t, guard.Admit(res, w1.Token()))
		require.NoError(t, w1.Release(ctx))
		rd, err := lk.AcquireShared(ctx, key, option.TTL(200*time.Millisecond))
		require.NoError(t, err)
		if err := guard.Admit(res, rd.Token()); err != nil {
			t.Fatalf("the reader's token before any newer write: %v; want admitted", err)
		}
		<-rd.Done() // paused past its lease
		w2, err := lk.Acquire(ctx, key)
		require.NoError(t, err)
		require.NoError(t, store.Put(ctx, res, "v2", w2.Token()))
		require.NoError(t, guard.Admit(res, w2.Token()))
		if err := store.Put(ctx, res, "derived from v1", rd.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("the paused reader's write after w2's: %v; want fence.ErrStale", err)
		}
		if err := guard.Admit(res, rd.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("the paused reader at the guard after w2: %v; want fence.ErrStale", err)
		}
		if err := rd.Extend(ctx, time.Minute); err == nil {
			t.Fatal("the paused reader's Extend: nil; want refused")
		}
		v, tok, _, err := store.Get(ctx, res)
		require.NoError(t, err)
		if v != "v2" || tok != w2.Token() {
			t.Fatalf("register = %q under %d; want w2's %q under %d", v, tok, "v2", w2.Token())
		}
		require.NoError(t, w2.Release(ctx))
	})
}
