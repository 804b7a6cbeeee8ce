package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// setKeysLeft returns, by key, the servers (by index) still holding its
// lock.
func setKeysLeft(t *testing.T, srvs []*redistest.Server, keys []string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, k := range keys {
		if left := lockKeysLeft(t, srvs, k); len(left) > 0 {
			out[k] = left
		}
	}
	return out
}

// eventuallyNoSetLock is setKeysLeft after giving late answers up to a
// second to be undone.
func eventuallyNoSetLock(t *testing.T, srvs []*redistest.Server, keys []string) map[string][]int {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := setKeysLeft(t, srvs, keys)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownersOf returns, by server, the owner of key's lock ("" for none).
func ownersOf(t *testing.T, srvs []*redistest.Server, key string) []string {
	t.Helper()
	out := make([]string, len(srvs))
	for i, s := range srvs {
		out[i] = do(t, s, "GET", "dlock:{"+key+"}:lock")
	}
	return out
}

// TestAcquireAllArgs: every bad argument is an *lease.ArgError naming it,
// and nothing reaches the servers.
func TestAcquireAllArgs(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.DurableNodes(true))
	many := make([]string, quorum.MaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	cases := []struct {
		name string
		ctx  context.Context
		keys []string
		opts []option.Option
		arg  string
	}{
		{"nil ctx", nil, []string{"a", "b"}, nil, "ctx"},
		{"nil keys", t.Context(), nil, nil, "keys"},
		{"no keys", t.Context(), []string{}, nil, "keys"},
		{"too many", t.Context(), many, nil, "keys"},
		{"empty key", t.Context(), []string{"a", "", "b"}, nil, "keys[1]"},
		{"repeated key", t.Context(), []string{"a", "b", "c", "b"}, nil, "keys[3]"},
		{"ttl", t.Context(), []string{"a", "b"}, []option.Option{option.TTL(-time.Second)}, "TTL"},
	}
	for _, tc := range cases {
		for _, try := range []bool{true, false} {
			var err error
			if try {
				_, err = lk.TryAcquireAll(tc.ctx, tc.keys, tc.opts...)
			} else {
				_, err = lk.AcquireAll(tc.ctx, tc.keys, tc.opts...)
			}
			var ae *lease.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, dlock.ErrInvalid) {
				t.Errorf("%s (try %v): err = %v; want an *lease.ArgError", tc.name, try, err)
				continue
			}
			if ae.Arg != tc.arg {
				t.Errorf("%s (try %v): Arg = %q; want %q (%v)", tc.name, try, ae.Arg, tc.arg, err)
			}
		}
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range srvs {
		if n := do(t, s, "DBSIZE"); n != "0" {
			t.Errorf("server %d holds %s keys after bad arguments; want none", i, n)
		}
	}
}

// TestTryAcquireAllAllOrNothing: one key of the set held elsewhere refuses
// the whole set, and the refused attempt leaves no key of the set held on
// any node; a free set is granted whole, and excludes single-key
// acquisitions of each of its keys, which in turn exclude the set.
func TestTryAcquireAllAllOrNothing(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true))
		ctx := t.Context()
		keys := []string{"a", "b", "c"}

		held, err := lk.TryAcquire(ctx, "b")
		require.NoError(t, err, "TryAcquire b")
		_, err = lk.TryAcquireAll(ctx, keys)
		if !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("TryAcquireAll with b held: %v; want ErrTaken", err)
		}
		var qe *quorum.Error
		if !errors.As(err, &qe) || qe.Key != "a,b,c" {
			t.Errorf("error %v; want a *Error with Key a,b,c", err)
		}
		if left := eventuallyNoSetLock(t, srvs, []string{"a", "c"}); len(left) > 0 {
			t.Errorf("locks left by the refused set: %v", left)
		}
		// A node whose vote for b timed out holds no b; none holds it for
		// anyone else, and a majority for the single lease.
		nb := 0
		for i, o := range ownersOf(t, srvs, "b") {
			switch o {
			case held.Owner():
				nb++
			case "":
			default:
				t.Errorf("node %d: b's owner %q; want the single lease's or none", i, o)
			}
		}
		if nb < lk.Quorum() {
			t.Errorf("b held by the single lease on %d nodes; want a majority", nb)
		}
		require.NoError(t, held.Release(ctx))
		// Release returns once a majority released; the rest release in
		// the background, and a node still holding b for the old lease
		// would refuse the set its vote there.
		if left := eventuallyNoSetLock(t, srvs, []string{"b"}); len(left) > 0 {
			t.Fatalf("b still held after its release: %v", left)
		}

		set, err := lk.TryAcquireAll(ctx, keys)
		require.NoError(t, err, "TryAcquireAll on free keys")
		if got := set.Keys(); len(got) != 3 || got[0].Key != "a" || got[1].Key != "b" || got[2].Key != "c" {
			t.Errorf("Keys() = %v; want a, b, c in order", got)
		}
		// A node whose vote timed out may hold none of the set; every
		// other holds all of it, and no node holds a key for anyone else.
		for _, k := range keys {
			n := 0
			for i, o := range ownersOf(t, srvs, k) {
				switch o {
				case set.Owner():
					n++
				case "":
				default:
					t.Errorf("node %d: %s's owner %q; want the set's or none", i, k, o)
				}
			}
			if n < lk.Quorum() {
				t.Errorf("%s held by the set on %d nodes; want a majority", k, n)
			}
			if _, err := lk.TryAcquire(ctx, k); !errors.Is(err, dlock.ErrTaken) {
				t.Errorf("TryAcquire %s inside a held set: %v; want ErrTaken", k, err)
			}
		}
		if _, err := lk.TryAcquireAll(ctx, []string{"z", "c"}); !errors.Is(err, dlock.ErrTaken) {
			t.Errorf("TryAcquireAll overlapping a held set: %v; want ErrTaken", err)
		}
		require.NoError(t, set.Release(ctx))
		if left := eventuallyNoSetLock(t, srvs, append(keys, "z")); len(left) > 0 {
			t.Errorf("locks left after the release: %v", left)
		}
		one, err := lk.TryAcquire(ctx, "c")
		require.NoError(t, err, "TryAcquire c after the set's release")
		require.NoError(t, one.Release(ctx))
	})
}

// TestAcquireAllTokens: each key of a set gets a token of its own, ordered
// with the tokens of single-key leases on that key, in both directions.
func TestAcquireAllTokens(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true))
		ctx := t.Context()
		last := map[string]fence.Token{}
		check := func(what string, l *lease.Lease) {
			t.Helper()
			if !l.Fenced() {
				t.Fatalf("%s: lease not fenced", what)
			}
			for _, h := range l.Keys() {
				if h.Token <= last[h.Key] {
					t.Errorf("%s: %s's token %d; want above %d, the last one of %s", what, h.Key, h.Token, last[h.Key], h.Key)
				}
				if tok, ok := l.TokenOf(h.Key); !ok || tok != h.Token {
					t.Errorf("%s: TokenOf(%s) = %d, %v; want %d", what, h.Key, tok, ok, h.Token)
				}
				last[h.Key] = h.Token
			}
			require.NoError(t, l.Release(ctx))
		}
		for i := range 4 {
			l, err := lk.TryAcquire(ctx, "a")
			require.NoError(t, err)
			check(fmt.Sprint("single a #", i), l)
			l, err = lk.AcquireAll(ctx, []string{"a", "b"})
			require.NoError(t, err)
			if l.Token() != l.Keys()[0].Token || l.Key() != "a" {
				t.Errorf("Token/Key %d %s; want the first key's", l.Token(), l.Key())
			}
			check(fmt.Sprint("set a,b #", i), l)
			l, err = lk.Acquire(ctx, "b")
			require.NoError(t, err)
			check(fmt.Sprint("single b #", i), l)
			l, err = lk.TryAcquireAll(ctx, []string{"b", "c", "a"})
			require.NoError(t, err)
			check(fmt.Sprint("set b,c,a #", i), l)
		}
		if _, ok := (&lease.Lease{}).TokenOf("x"); ok {
			t.Fatal("TokenOf on a zero lease")
		}
	})
}

// TestAcquireAllOverlapping: callers asking for overlapping sets in
// opposite orders, and a single-key caller, all make progress, and no two
// holders of a key overlap by their own clocks; tokens of each key follow
// the order of acquisitions.
func TestAcquireAllOverlapping(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		const rounds = 30
		callers := [][]string{{"a", "b"}, {"b", "a"}, {"b", "c", "a"}, {"a"}}
		var (
			mu    sync.Mutex
			holds = map[string][]safety.Hold{}
			acqs  = map[string][]safety.Acquisition{}
			done  = make([]int, len(callers))
			wg    sync.WaitGroup
		)
		for ci, keys := range callers {
			wg.Go(func() {
				for range rounds {
					start := time.Now()
					l, err := lk.AcquireAll(ctx, keys)
					if err != nil {
						t.Errorf("AcquireAll %v: %v", keys, err)
						return
					}
					at := time.Now()
					until := at.Add(l.TTL())
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					if released := time.Now(); released.Before(until) {
						until = released
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release %v: %v", keys, err)
						return
					}
					mu.Lock()
					for _, h := range l.Keys() {
						holds[h.Key] = append(holds[h.Key], safety.Hold{Holder: l.Owner(), At: at, Until: until})
						acqs[h.Key] = append(acqs[h.Key], safety.Acquisition{Holder: l.Owner(), Start: start, Granted: at, Token: h.Token})
					}
					done[ci]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for ci, n := range done {
			if n != rounds {
				t.Errorf("caller %v: %d of %d rounds", callers[ci], n, rounds)
			}
		}
		for key, hs := range holds {
			for _, v := range safety.CheckShared(hs) {
				t.Errorf("key %s: %v", key, v)
			}
			for _, v := range safety.CheckOrder(acqs[key]) {
				t.Errorf("key %s: %v", key, v)
			}
		}
		if left := eventuallyNoSetLock(t, srvs, []string{"a", "b", "c"}); len(left) > 0 {
			t.Errorf("locks left: %v", left)
		}
	})
}

// TestAcquireAllNodesDown: with 2 of 5 nodes down a set is granted,
// extended and released; with 3 down the attempt fails, not as taken, and
// leaves no key held on the live nodes.
func TestAcquireAllNodesDown(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true))
		ctx := t.Context()
		keys := []string{"x", "y", "z"}
		srvs[0].Kill()
		srvs[3].Kill()
		l, err := lk.TryAcquireAll(ctx, keys)
		require.NoError(t, err, "TryAcquireAll with 2 of 5 down")
		require.NoError(t, l.Extend(ctx, 10*time.Second), "Extend with 2 of 5 down")
		require.NoError(t, l.Release(ctx), "Release with 2 of 5 down")
		srvs[4].Kill()
		live := []*redistest.Server{srvs[1], srvs[2]}
		_, err = lk.TryAcquireAll(ctx, keys)
		var qe *quorum.Error
		if !errors.As(err, &qe) || errors.Is(err, dlock.ErrTaken) || qe.Got >= qe.Needed {
			t.Fatalf("TryAcquireAll with 3 of 5 down: %v; want a *Error short of votes, not taken", err)
		}
		if left := eventuallyNoSetLock(t, live, keys); len(left) > 0 {
			t.Errorf("locks left on the live nodes: %v", left)
		}
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err = lk.AcquireAll(actx, keys)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) || errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("AcquireAll with 3 of 5 down: %v; want the deadline and a *Error, not taken", err)
		}
		if left := eventuallyNoSetLock(t, live, keys); len(left) > 0 {
			t.Errorf("locks left on the live nodes after AcquireAll gave up: %v", left)
		}
		for i, s := range live {
			if n := do(t, s, "EXISTS", "dlock:{x}:queue"); n != "0" {
				t.Errorf("live node %d: the waiter's ticket stays after it gave up", i)
			}
		}
	})
}

// TestAcquireAllLease: Extend, auto-renewal, Done and Release act on every
// key of the set on every node.
func TestAcquireAllLease(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(10*time.Second))
		ctx := t.Context()
		keys := []string{"p", "q", "r"}
		// pttls returns by node the PTTL of each key's lock, for the
		// nodes that hold any (a node whose vote timed out holds none).
		pttls := func() [][]int64 {
			var out [][]int64
			for _, s := range srvs {
				var row []int64
				for _, k := range keys {
					var ms int64
					fmt.Sscan(do(t, s, "PTTL", "dlock:{"+k+"}:lock"), &ms)
					row = append(row, ms)
				}
				if slices.ContainsFunc(row, func(ms int64) bool { return ms != -2 }) {
					out = append(out, row)
				}
			}
			return out
		}

		l, err := lk.TryAcquireAll(ctx, keys, option.TTL(time.Second))
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, 8*time.Second))
		// Extend returns on a majority; the other nodes follow in the
		// background.
		extended := 0
		for _, row := range pttls() {
			if !slices.ContainsFunc(row, func(ms int64) bool { return ms <= time.Second.Milliseconds() }) {
				extended++
			}
		}
		if extended < lk.Quorum() {
			t.Errorf("the set extended on %d nodes; want a majority", extended)
		}
		require.NoError(t, l.Release(ctx))
		select {
		case <-l.Done():
		default:
			t.Error("Done not closed after Release")
		}
		if left := eventuallyNoSetLock(t, srvs, keys); len(left) > 0 {
			t.Errorf("locks left after Release: %v", left)
		}
		if err := l.Extend(ctx, time.Second); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Extend after Release: %v; want ErrNotHeld", err)
		}
		if err := l.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("second Release: %v; want ErrNotHeld", err)
		}

		// Auto-renewal keeps the set past its TTL; a key taken over on
		// a majority makes the renewal fail and the lease end as lost.
		l, err = lk.AcquireAll(ctx, keys, option.TTL(600*time.Millisecond), option.AutoRenew(true))
		require.NoError(t, err)
		time.Sleep(1500 * time.Millisecond)
		if err := l.Err(); err != nil {
			t.Fatalf("auto-renewed set after 2.5 TTLs: %v; want held", err)
		}
		for _, s := range srvs[:3] {
			do(t, s, "SET", "dlock:{q}:lock", "intruder")
		}
		select {
		case <-l.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("Done not closed after q was taken over on a majority")
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Err() = %v; want ErrLost", err)
		}
		_ = l.Release(ctx)
		for _, s := range srvs {
			do(t, s, "DEL", "dlock:{q}:lock")
		}

		// Without renewal the set expires as a whole.
		l, err = lk.TryAcquireAll(ctx, keys, option.TTL(time.Second))
		require.NoError(t, err)
		<-l.Done()
		if err := l.Err(); !errors.Is(err, dlock.ErrExpired) {
			t.Errorf("Err() = %v; want ErrExpired", err)
		}
		if left := eventuallyNoSetLock(t, srvs, keys); len(left) > 0 {
			t.Errorf("locks left after expiry: %v", left)
		}
	})
}

// TestAcquireAllWithoutTokens: without tokens a set is granted whole with
// no token, and excludes single-key leases as with them.
func TestAcquireAllWithoutTokens(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.Tokens(false))
		ctx := t.Context()
		l, err := lk.TryAcquireAll(ctx, []string{"m", "n"})
		require.NoError(t, err)
		if l.Fenced() || slices.ContainsFunc(l.Keys(), func(h lease.Held) bool { return h.Token != 0 }) {
			t.Errorf("Keys() = %v; want no tokens", l.Keys())
		}
		if _, err := lk.TryAcquire(ctx, "n"); !errors.Is(err, dlock.ErrTaken) {
			t.Errorf("TryAcquire n inside a held set: %v; want ErrTaken", err)
		}
		require.NoError(t, l.Extend(ctx, 5*time.Second))
		require.NoError(t, l.Release(ctx))
		one, err := lk.TryAcquire(ctx, "m")
		require.NoError(t, err)
		if _, err := lk.TryAcquireAll(ctx, []string{"n", "m"}); !errors.Is(err, dlock.ErrTaken) {
			t.Errorf("TryAcquireAll with m held: %v; want ErrTaken", err)
		}
		require.NoError(t, one.Release(ctx))
		if left := eventuallyNoSetLock(t, srvs, []string{"m", "n"}); len(left) > 0 {
			t.Errorf("locks left: %v", left)
		}
	})
}

// TestAcquireAllGuard: with the lost-data guard on, fresh nodes sit out
// and a set waits for them as a single key does, and is then granted with
// tokens above the repaired floor.
func TestAcquireAllGuard(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := lk.TryAcquireAll(ctx, []string{"g", "h"})
		var qe *quorum.Error
		if !errors.As(err, &qe) || errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("TryAcquireAll on fresh guarded nodes: %v; want a *Error, the nodes sitting out", err)
		}
		l, err := lk.AcquireAll(ctx, []string{"g", "h"})
		require.NoError(t, err, "AcquireAll once the nodes sat out")
		if !l.Fenced() {
			t.Error("lease not fenced")
		}
		require.NoError(t, l.Release(ctx))
	})
}

// TestAcquireAllClientRetries: a go-redis client with its default options
// sends a script again when its reply is lost; the set's vote, commit and
// release each count once.
func TestAcquireAllClientRetries(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	drops := make([]*redistest.Dropper, len(srvs))
	nodes := make([]node.Node, len(srvs))
	for i, s := range srvs {
		drops[i] = redistest.StartDropper(t, s.Addr())
		nodes[i] = goRedisDefault(t, drops[i].Addr())
	}
	lk := newLocker(t, nodes, option.DurableNodes(true), option.TTL(10*time.Second))
	ctx := t.Context()
	keys := []string{"u", "v", "w"}
	for range 3 { // load the scripts: a NOSCRIPT answer is a reply too
		l, err := lk.TryAcquireAll(ctx, keys)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	dropAll := func(skip int) {
		for _, d := range drops {
			d.Drop(skip, 1)
		}
	}
	dropped := func() int {
		n := 0
		for _, d := range drops {
			n += d.Dropped()
		}
		return n
	}

	before := dropped()
	dropAll(0) // every vote's reply
	a, err := lk.TryAcquireAll(ctx, keys)
	if err != nil {
		t.Fatalf("TryAcquireAll with every vote's reply lost once: %v; want the set", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	before = dropped()
	dropAll(0) // every release's reply
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release with every reply lost once: %v; want nil", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	if left := eventuallyNoSetLock(t, srvs, keys); len(left) > 0 {
		t.Errorf("locks left after the release: %v", left)
	}

	prev, err := lk.TryAcquireAll(ctx, keys)
	require.NoError(t, err)
	require.NoError(t, prev.Release(ctx))
	before = dropped()
	dropAll(1) // every commit's reply: the vote's passes
	b, err := lk.TryAcquireAll(ctx, keys)
	if err != nil {
		t.Fatalf("TryAcquireAll with every commit's reply lost once: %v; want the set", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	for _, h := range b.Keys() {
		if old, _ := prev.TokenOf(h.Key); h.Token <= old {
			t.Errorf("%s: token %d after a commit run twice; want above %d", h.Key, h.Token, old)
		}
	}
	require.NoError(t, b.Release(ctx))
}

// TestMemorySets: thousands of set acquisitions and releases over
// overlapping keys, blocking waiters among them, leave each key's fence
// counter, set to expire, and nothing else.
func TestMemorySets(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		keys := []string{"s0", "s1", "s2", "s3"}
		const workers, rounds = 4, 300
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					set := []string{keys[(w+i)%4], keys[(w+i+1)%4], keys[(w+2*i+3)%4]}
					set = slices.Compact(set)
					if len(set) == 3 && set[2] == set[0] {
						set = set[:2]
					}
					var l *lease.Lease
					var err error
					if i%2 == 0 {
						l, err = lk.AcquireAll(ctx, set)
					} else if l, err = lk.TryAcquireAll(ctx, set); err != nil {
						var qe *quorum.Error
						if errors.As(err, &qe) {
							continue
						}
					}
					if err != nil {
						t.Errorf("acquire %v: %v", set, err)
						return
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("release %v: %v", set, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, key := range keys {
			var got []map[string]int64
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				got = keyBytes(t, srvs, key)
				left := false
				for _, m := range got {
					left = left || len(m) != 1 || m["fence"] == 0 || m["fence"] > 128
				}
				if !left || time.Now().After(deadline) {
					break
				}
			}
			for i, m := range got {
				if len(m) != 1 || m["fence"] == 0 || m["fence"] > 128 {
					t.Errorf("node %d, key %s: %v; want only the fence counter, at most 128 bytes", i, key, m)
				}
			}
		}
		for i, s := range srvs {
			ks, err := s.Keys()
			require.NoError(t, err)
			for _, k := range ks {
				if !strings.HasSuffix(k, "}:fence") && !strings.HasPrefix(k, "dlock:high") {
					t.Errorf("node %d: key %s left", i, k)
				}
			}
		}
	})
}
