package single_test

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

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func TestAcquireAllArgs(t *testing.T) {
	srv := redistest.Start(t)
	lk := newLocker(t, redistest.NodeFor(t, "go-redis", srv.Addr()))
	many := make([]string, single.MaxKeys+1)
	for i := range many {
		many[i] = "k" + strconv.Itoa(i)
	}
	for _, tt := range []struct {
		name string
		keys []string
		opts []option.Option
		arg  string
	}{
		{"no keys", nil, nil, "keys"},
		{"too many", many, nil, "keys"},
		{"a repeat", []string{"a", "b", "a"}, nil, "keys[2]"},
		{"an empty key", []string{"a", ""}, nil, "keys[1]"},
		{"a bad TTL", []string{"a"}, []option.Option{option.TTL(-time.Second)}, "TTL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []func(context.Context, []string, ...option.Option) (*lease.Lease, error){lk.TryAcquireAll, lk.AcquireAll} {
				_, err := f(t.Context(), tt.keys, tt.opts...)
				var ae *lease.ArgError
				if !errors.As(err, &ae) || ae.Arg != tt.arg || !errors.Is(err, lease.ErrInvalid) {
					t.Fatalf("got %v; want an *lease.ArgError naming %s", err, tt.arg)
				}
			}
		})
	}
	var nilCtx context.Context // the bad argument under test
	for _, f := range []func(context.Context, []string, ...option.Option) (*lease.Lease, error){lk.TryAcquireAll, lk.AcquireAll} {
		if _, err := f(nilCtx, []string{"a"}); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("nil ctx: %v; want ErrInvalid", err)
		}
	}
	if keys, err := srv.Keys(); err != nil || len(keys) != 0 {
		t.Fatalf("keys after bad calls: %v, %v; want none", keys, err)
	}
}

// TestAcquireAll: a set is held whole, each key with a token of its own
// ordered with the single leases' on that key; a key of it is held against
// a lease on that key alone and the other way round; a set refused for
// one key leaves every other key free; the lease extends, renews, releases
// and ends as a whole.
func TestAcquireAll(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n, option.TTL(time.Second))
		ctx := t.Context()
		before, err := lk.TryAcquire(ctx, "b")
		require.NoError(t, err)
		require.NoError(t, before.Release(ctx))

		set, err := lk.TryAcquireAll(ctx, []string{"a", "b", "c"})
		require.NoError(t, err)
		held := set.Keys()
		if len(held) != 3 || held[0].Key != "a" || held[1].Key != "b" || held[2].Key != "c" || set.Key() != "a" || set.Token() != held[0].Token {
			t.Fatalf("Keys %v, Key %q, Token %d; want a, b, c in order, Key and Token a's", held, set.Key(), set.Token())
		}
		if held[1].Token <= before.Token() {
			t.Fatalf("b's token in the set %d; want above the single lease's before it, %d", held[1].Token, before.Token())
		}
		for _, k := range []string{"a", "b", "c"} {
			if _, err := lk.TryAcquire(ctx, k); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("TryAcquire(%s) while the set holds it: %v; want ErrTaken", k, err)
			}
		}
		if _, err := lk.TryAcquireAll(ctx, []string{"c", "d"}); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquireAll(c, d) while c is held: %v; want ErrTaken", err)
		}
		if o := field(t, srv, "d", "owner"); o != "" {
			t.Fatalf("d's owner after a refused set: %q; want none", o)
		}
		require.NoError(t, set.Extend(ctx, 2*time.Second))
		require.NoError(t, set.Release(ctx))
		select {
		case <-set.Done():
		default:
			t.Fatal("a released set's Done is open")
		}
		after, err := lk.TryAcquire(ctx, "b")
		require.NoError(t, err, "TryAcquire(b) after the set's release")
		if after.Token() <= held[1].Token {
			t.Fatalf("b's token after the set %d; want above the set's %d", after.Token(), held[1].Token)
		}
		if _, err := lk.TryAcquireAll(ctx, []string{"a", "b"}); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquireAll(a, b) while b is held alone: %v; want ErrTaken", err)
		}
		if o := field(t, srv, "a", "owner"); o != "" {
			t.Fatalf("a's owner after a refused set: %q; want none", o)
		}
		require.NoError(t, after.Release(ctx))

		renewed, err := lk.TryAcquireAll(ctx, []string{"x", "y"}, option.TTL(300*time.Millisecond), option.AutoRenew(true))
		require.NoError(t, err)
		time.Sleep(time.Second)
		if renewed.Err() != nil {
			t.Fatalf("an auto-renewed set ended: %v", renewed.Err())
		}
		if _, err := lk.TryAcquire(ctx, "y"); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire(y) under a renewed set: %v; want ErrTaken", err)
		}
		require.NoError(t, renewed.Release(ctx))

		lapsed, err := lk.TryAcquireAll(ctx, []string{"p", "q"}, option.TTL(100*time.Millisecond))
		require.NoError(t, err)
		<-lapsed.Done()
		if !errors.Is(lapsed.Err(), lease.ErrExpired) {
			t.Fatalf("a set left to run out ended with %v; want ErrExpired", lapsed.Err())
		}
		if err := lapsed.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Extend of a lapsed set: %v; want ErrNotHeld", err)
		}
	})
}

// TestAcquireAllStale: a set one of whose keys was claimed by another
// after its lease there ended on the server (ended by hand here, as a
// clock jump or a pause would) is refused at Extend, whole, with the key's
// newer token, and its other key is not run on.
func TestAcquireAllStale(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		set, err := lk.TryAcquireAll(ctx, []string{"s1", "s2"}, option.TTL(5*time.Second))
		require.NoError(t, err)
		_, err = srv.Do("HSET", "dlock:{s2}", "until", "1")
		require.NoError(t, err)
		s1until := field(t, srv, "s1", "until")
		other, err := lk.TryAcquire(ctx, "s2")
		require.NoError(t, err)
		var se *fence.StaleError
		err = set.Extend(ctx, time.Second)
		if !errors.Is(err, lease.ErrNotHeld) || !errors.As(err, &se) || se.Highest != other.Token() {
			t.Fatalf("Extend of a set whose s2 went to another: %v; want ErrNotHeld and a StaleError up to %d", err, other.Token())
		}
		if u := field(t, srv, "s1", "until"); u != s1until {
			t.Fatalf("s1's until went from %s to %s on a refused Extend; want it left", s1until, u)
		}
	})
}

// TestAcquireAllWaits: sets and single leases over overlapping keys, the
// sets asking in opposite orders, all waiting: every call is served within
// the test's bound (no deadlock), and on every key no two holders' leases
// overlap, checked by internal/testkit/safety; what is left on the server then
// expires.
func TestAcquireAllWaits(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n, option.TTL(2*time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		keys := []string{"k1", "k2", "k3"}
		res := map[string]*safety.Resource{}
		for _, k := range keys {
			res[k] = safety.NewResource(k)
		}
		asks := [][]string{{"k1", "k2"}, {"k2", "k1"}, {"k2", "k3"}, {"k3", "k1"}, {"k1"}, {"k2"}, {"k3"}, {"k1", "k2", "k3"}}
		const rounds = 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		var served int
		for w, ask := range asks {
			wg.Go(func() {
				for i := range rounds {
					l, err := lk.AcquireAll(ctx, ask)
					if err != nil {
						t.Errorf("caller %d (%v) round %d: %v", w, ask, i, err)
						return
					}
					for _, h := range l.Keys() {
						res[h.Key].Granted(safety.Part(l, h.Token))
					}
					for _, h := range l.Keys() {
						if err := res[h.Key].Write(ctx, safety.Part(l, h.Token), fmt.Sprintf("%d-%d", w, i)); err != nil {
							t.Errorf("caller %d: write to %s: %v", w, h.Key, err)
						}
					}
					time.Sleep(time.Duration(w%3) * time.Millisecond)
					for _, h := range l.Keys() {
						res[h.Key].Released(safety.Part(l, h.Token))
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("caller %d: release: %v", w, err)
					}
					mu.Lock()
					served++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if served != len(asks)*rounds {
			t.Fatalf("served %d of %d calls", served, len(asks)*rounds)
		}
		for _, k := range keys {
			if r := res[k].Check(); r.Overlaps != 0 || !r.Safe() {
				t.Errorf("key %s: %v", k, r)
			}
		}
		// Bounded state: once every call was served, what is left is each
		// key's hash (its counter), set to expire after the idle TTL, and
		// records of given-up owners, which expire too; no queue.
		left, err := srv.Keys()
		require.NoError(t, err)
		for _, k := range left {
			if strings.HasSuffix(k, ":q") || strings.HasSuffix(k, ":qx") {
				t.Errorf("queue key %s left after every call was served", k)
			}
			pttl, err := srv.Do("PTTL", k)
			require.NoError(t, err)
			if ms, _ := strconv.ParseInt(pttl, 10, 64); ms <= 0 {
				t.Errorf("%s: PTTL %s; want every key left to expire", k, pttl)
			}
		}
		if len(left) > 2*len(keys) {
			t.Errorf("keys left: %v; want at most a hash and a gone record per key", left)
		}
	})
}

// TestAcquireAllGivesUp: a set waiter whose context ends leaves no lock and
// no ticket behind, and the key it queued on is free for the next caller.
func TestAcquireAllGivesUp(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		held, err := lk.TryAcquire(ctx, "busy")
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = lk.AcquireAll(wctx, []string{"free", "busy"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AcquireAll past its deadline: %v; want DeadlineExceeded", err)
		}
		for _, k := range []string{"dlock:{free}:q", "dlock:{busy}:q"} {
			if n, err := srv.Do("ZCARD", k); err != nil || n != "0" {
				t.Fatalf("%s after the waiter gave up: ZCARD %q, %v; want 0", k, n, err)
			}
		}
		l, err := lk.TryAcquire(ctx, "free")
		require.NoError(t, err, "TryAcquire(free) after the set's waiter gave up")
		require.NoError(t, l.Release(ctx))
		require.NoError(t, held.Release(ctx))
	})
}
