package single_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(examplemain.With(m, 1), redistest.ClientGoroutines()...)
}

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

func newLocker(t testing.TB, n node.Node, opts ...option.Option) *single.Locker {
	t.Helper()
	lk, err := single.New(n, opts...)
	require.NoError(t, err, "New")
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// field reads one field of the lock's state (owner, attempts, until) in
// either of its forms, "" when absent.
func field(t *testing.T, srv *redistest.Server, key, f string) string {
	t.Helper()
	v, err := srv.LockField("dlock:{"+key+"}", f)
	if err != nil {
		t.Fatalf("lock field %s %s: %v", key, f, err)
	}
	return v
}

// state is all the lock keeps on the server, in either of its forms: the
// lean string or the hash.
func state(t *testing.T, srv *redistest.Server, key string) string {
	t.Helper()
	k := "dlock:{" + key + "}"
	if typ, _ := srv.Do("TYPE", k); typ == "string" {
		v, err := srv.Do("GET", k)
		require.NoError(t, err, "GET %s", key)
		return "string " + v
	}
	v, err := srv.Do("HGETALL", k)
	require.NoError(t, err, "HGETALL %s", key)
	return v
}

func TestRaceOneWinner(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		var (
			wg     sync.WaitGroup
			wins   atomic.Int32
			mu     sync.Mutex
			winner *lease.Lease
			start  = make(chan struct{})
		)
		for range 100 {
			wg.Go(func() {
				<-start
				l, err := lk.TryAcquire(ctx, "race")
				switch {
				case err == nil:
					wins.Add(1)
					mu.Lock()
					winner = l
					mu.Unlock()
				case !errors.Is(err, lease.ErrTaken):
					t.Errorf("TryAcquire: %v; want nil or ErrTaken", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("winners = %d; want 1", got)
		}
		require.NoError(t, winner.Release(ctx), "Release")
	})
}

// TestTokensIncrease takes one key 1,000 times in turn: mostly released,
// every 7th left to expire, every 11th lost to the next owner while its
// holder still thinks it has it.
func TestTokensIncrease(t *testing.T) {
	t.Parallel()
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		a, b := newLocker(t, n), newLocker(t, n)
		ctx := t.Context()
		var last fence.Token
		var lost *lease.Lease
		for i := range 1000 {
			lk := a
			if i%2 == 1 {
				lk = b
			}
			ttl := time.Minute
			if i%7 == 0 || i%11 == 0 {
				ttl = 20 * time.Millisecond
			}
			l, err := lk.Acquire(ctx, "seq", option.TTL(ttl))
			require.NoError(t, err, "acquisition %d", i)
			if l.Token() <= last {
				t.Fatalf("acquisition %d: token %d after %d; want strictly increasing", i, l.Token(), last)
			}
			last = l.Token()
			if lost != nil {
				if err := lost.Release(ctx); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, fence.ErrStale) {
					t.Fatalf("release of a lease lost to the next owner: %v; want ErrNotHeld and ErrStale", err)
				}
				lost = nil
			}
			switch {
			case i%11 == 0:
				lost = l // the next Acquire waits for its expiry on the server
			case i%7 == 0:
				<-l.Done()
				if !errors.Is(l.Err(), lease.ErrExpired) {
					t.Fatalf("lease %d ended with %v; want ErrExpired", i, l.Err())
				}
			default:
				require.NoError(t, l.Release(ctx), "release %d", i)
			}
		}
		if lost != nil {
			_ = lost.Release(ctx)
		}
		if got, want := field(t, srv, "seq", "attempts"), last.String(); got != want {
			t.Fatalf("attempts = %s; want %s", got, want)
		}
	})
}

// takeOver lets a's lease on key expire on the server and b claim it.
func takeOver(t *testing.T, a, b *single.Locker, key string) (old, cur *lease.Lease) {
	t.Helper()
	ctx := t.Context()
	old, err := a.Acquire(ctx, key, option.TTL(30*time.Millisecond))
	require.NoError(t, err, "first TryAcquire")
	cur, err = b.Acquire(ctx, key)
	require.NoError(t, err, "second Acquire")
	if cur.Token() <= old.Token() {
		t.Fatalf("token %d after %d; want larger", cur.Token(), old.Token())
	}
	return old, cur
}

func TestStaleRefusedChangesNothing(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a, b := newLocker(t, n), newLocker(t, n)
		old, cur := takeOver(t, a, b, "stale")
		defer cur.Release(ctx)
		before := state(t, srv, "stale")

		err := old.Extend(ctx, time.Minute)
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("stale Extend: %v; want ErrNotHeld", err)
		}
		err = old.Release(ctx)
		if !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("stale Release: %v; want ErrNotHeld", err)
		}
		if after := state(t, srv, "stale"); after != before {
			t.Fatalf("hash after stale calls:\n%s\nwant unchanged:\n%s", after, before)
		}
		if _, err := a.TryAcquire(ctx, "stale"); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire while the new owner holds: %v; want ErrTaken", err)
		}
		if err := cur.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("current owner's Extend: %v", err)
		}
	})
}

func TestStaleErrorFromServer(t *testing.T) {
	// The server itself refuses a stale token, even while the local
	// validity has not run out: here the counter is rewritten under the
	// lease, in the lean string and in the hash.
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		for _, form := range []string{"lean", "hash"} {
			t.Run(form, func(t *testing.T) { staleFromServer(t, srv, n, form) })
		}
	})
}

func staleFromServer(t *testing.T, srv *redistest.Server, n node.Node, form string) {
	{
		ctx := t.Context()
		lk := newLocker(t, n)
		l, err := lk.TryAcquire(ctx, "rewritten")
		require.NoError(t, err)
		defer srv.Do("DEL", "dlock:{rewritten}")
		if form == "hash" {
			require.NoError(t, srv.LockHash("dlock:{rewritten}"))
			_, err = srv.Do("HINCRBY", "dlock:{rewritten}", "attempts", "1")
		} else {
			_, err = srv.Do("SET", "dlock:{rewritten}", (l.Token()+1).String()+" "+l.Owner(), "KEEPTTL")
		}
		require.NoError(t, err)
		before := state(t, srv, "rewritten")
		err = l.Extend(ctx, time.Minute)
		var se *fence.StaleError
		if !errors.Is(err, lease.ErrNotHeld) || !errors.As(err, &se) || se.Highest != l.Token()+1 {
			t.Fatalf("Extend with a stale token: %v; want ErrNotHeld and *fence.StaleError{Highest: %d}", err, l.Token()+1)
		}
		if !errors.Is(l.Err(), lease.ErrLost) {
			t.Fatalf("lease ended with %v; want ErrLost", l.Err())
		}
		if err := l.Release(ctx); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Release with a stale token: %v; want ErrStale", err)
		}
		if after := state(t, srv, "rewritten"); after != before {
			t.Fatalf("state after stale calls:\n%s\nwant unchanged:\n%s", after, before)
		}
	}
}

func TestExtendAfterExpiry(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		// Acquire, not TryAcquire: under load a 20 ms grant can arrive
		// after its validity, and Acquire then tries again. The deadline
		// turns a machine too loaded to ever get one in time into a
		// failure that says so, not a hang.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		lk := newLocker(t, n)

		// Expired by the local clock: refused without asking the server,
		// which is made to still hold the lease for this owner so that it
		// would have accepted the extension.
		l, err := lk.Acquire(ctx, "exp", option.TTL(20*time.Millisecond))
		require.NoError(t, err, "Acquire with a 20ms TTL")
		<-l.Done()
		const later = "99999999999999" // ms: the server's lease runs for centuries
		// A hash of its own, without expiry: the lean key may still be on
		// the server for its last ms, and turned into the hash it would
		// expire with them.
		srv.MustDo(t, "DEL", "dlock:{exp}")
		_, err = srv.Do("HSET", "dlock:{exp}", "owner", l.Owner(), "until", later)
		require.NoError(t, err)
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, lease.ErrExpired) {
			t.Fatalf("Extend after local expiry: %v; want ErrNotHeld and ErrExpired", err)
		}
		if got := field(t, srv, "exp", "until"); got != later {
			t.Fatalf("until = %s after an Extend refused locally; want %s: the server was asked", got, later)
		}
		_, err = srv.Do("HDEL", "dlock:{exp}", "owner", "until")
		require.NoError(t, err)

		// Expired on the server while the client still counts it valid
		// (as after a jump of the server's clock): never revived.
		l, err = lk.TryAcquire(ctx, "exp")
		require.NoError(t, err)
		require.NoError(t, srv.LockHash("dlock:{exp}"))
		_, err = srv.Do("HSET", "dlock:{exp}", "until", "1")
		require.NoError(t, err)
		err = l.Extend(ctx, time.Minute)
		if !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Extend after server expiry: %v; want ErrNotHeld, not ErrStale", err)
		}
		if got := field(t, srv, "exp", "until"); got != "1" {
			t.Fatalf("until = %s after refused Extend; want 1", got)
		}
		if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release after server expiry: %v; want ErrNotHeld", err)
		}
		if got := field(t, srv, "exp", "owner"); got != "" {
			t.Fatalf("owner = %q after release; want none", got)
		}

		// The same in the lean form, where the server's expiry drops the
		// key ('token owner') with the lease.
		l, err = lk.TryAcquire(ctx, "exp-lean")
		require.NoError(t, err)
		if typ := srv.MustDo(t, "TYPE", "dlock:{exp-lean}"); typ != "string" {
			t.Fatalf("lock key of type %s; want the lean string", typ)
		}
		srv.MustDo(t, "DEL", "dlock:{exp-lean}")
		err = l.Extend(ctx, time.Minute)
		if !errors.Is(err, lease.ErrNotHeld) || errors.Is(err, fence.ErrStale) {
			t.Fatalf("Extend after server expiry, lean: %v; want ErrNotHeld, not ErrStale", err)
		}
		if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release after server expiry, lean: %v; want ErrNotHeld", err)
		}
		if n := srv.MustDo(t, "EXISTS", "dlock:{exp-lean}"); n != "0" {
			t.Fatalf("EXISTS after the refused calls = %s; want 0: nothing revived", n)
		}
	})
}

func TestReleaseHeldByOther(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a, b := newLocker(t, n), newLocker(t, n)
		old, cur := takeOver(t, a, b, "other")
		owner := field(t, srv, "other", "owner")
		if err := old.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release: %v; want ErrNotHeld", err)
		}
		if got := field(t, srv, "other", "owner"); got != owner || got != cur.Owner() {
			t.Fatalf("owner = %q; want %q unchanged", got, owner)
		}
		if err := cur.Release(ctx); err != nil {
			t.Fatalf("owner's Release: %v", err)
		}
	})
}

// TestPausedHolderFenced: a holder paused past its TTL writes after the next
// holder did; the Guard and the Store refuse it.
func TestPausedHolderFenced(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a, b := newLocker(t, n), newLocker(t, n)
		store := fence.NewStore(n)
		var guard fence.Guard

		old, err := a.Acquire(ctx, "res", option.TTL(50*time.Millisecond))
		require.NoError(t, err)
		time.Sleep(80 * time.Millisecond) // the pause
		cur, err := b.TryAcquire(ctx, "res")
		require.NoError(t, err, "next holder")
		defer cur.Release(ctx)
		require.NoError(t, guard.Admit("res", cur.Token()), "guard, next holder")
		require.NoError(t, store.Put(ctx, "data:res", "new", cur.Token()), "store, next holder")
		if err := guard.Admit("res", old.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("guard, paused holder: %v; want ErrStale", err)
		}
		if err := store.Put(ctx, "data:res", "old", old.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("store, paused holder: %v; want ErrStale", err)
		}
		if v, tok, _, err := store.Get(ctx, "data:res"); err != nil || v != "new" || tok != cur.Token() {
			t.Fatalf("store holds %q@%d, %v; want %q@%d", v, tok, err, "new", cur.Token())
		}
	})
}

func TestReplicas(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, redistest.WithReplicaOf(master))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, replica.WaitSynced(ctx))
	start := time.Now()
	require.NoError(t, replica.WaitAcking(ctx))
	t.Logf("replica acknowledging writes %v after WaitSynced", time.Since(start))
	for _, c := range redistest.Nodes(t, master.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			lk := newLocker(t, c.Node, option.Replicas(1, 200*time.Millisecond))
			l, err := lk.TryAcquire(ctx, "rep")
			if err != nil {
				mi, _ := master.Do("INFO", "replication")
				ri, _ := replica.Do("INFO", "replication")
				master.Do("SET", "x", "1")
				w, werr := master.Do("WAIT", "1", "200")
				t.Fatalf("TryAcquire with the replica up: %v\nmaster:\n%s\nreplica:\n%s\nWAIT after SET: %s %v", err, mi, ri, w, werr)
			}
			require.NoError(t, l.Release(ctx))

			_, err = replica.Do("CLIENT", "PAUSE", "10000", "WRITE")
			require.NoError(t, err)
			defer replica.Do("CLIENT", "UNPAUSE")
			_, err = lk.TryAcquire(ctx, "rep")
			var re *single.ReplicaError
			if !errors.Is(err, single.ErrReplicas) || !errors.As(err, &re) || re.Acked != 0 || re.Wanted != 1 {
				t.Fatalf("TryAcquire with the replica paused: %v; want *ReplicaError{Acked: 0, Wanted: 1}", err)
			}
			if got := field(t, master, "rep", "owner"); got != "" {
				t.Fatalf("owner = %q after a failed claim; want none", got)
			}
			_, err = replica.Do("CLIENT", "UNPAUSE")
			require.NoError(t, err)
		})
	}
}

func TestAcquireWakesOnRelease(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a, b := newLocker(t, n), newLocker(t, n)
		held, err := a.TryAcquire(ctx, "wake")
		require.NoError(t, err)
		type res struct {
			l   *lease.Lease
			at  time.Time
			err error
		}
		got := make(chan res, 1)
		go func() {
			// A slow retry, so only the published release can wake it soon.
			l, err := b.Acquire(ctx, "wake", option.Retry(10*time.Second, 10*time.Second))
			got <- res{l, time.Now(), err}
		}()
		waitSubscribed(t, srv, "dlock:{wake}:released")
		released := time.Now()
		require.NoError(t, held.Release(ctx))
		r := <-got
		if r.err != nil {
			t.Fatalf("Acquire: %v", r.err)
		}
		t.Logf("handoff: %v from release to the waiter's lease", r.at.Sub(released))
		if r.l.Token() <= held.Token() {
			t.Fatalf("token %d; want above the holder's %d", r.l.Token(), held.Token())
		}
		_ = r.l.Release(ctx)
	})
}

func waitSubscribed(t testing.TB, srv *redistest.Server, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		out, err := srv.Do("PUBSUB", "NUMSUB", channel)
		if err == nil && out != channel+"\n0" {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no subscriber on %s", channel)
}

func TestAcquireCancelled(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		a, b := newLocker(t, n), newLocker(t, n)
		held, err := a.TryAcquire(t.Context(), "cancel")
		require.NoError(t, err)
		defer held.Release(t.Context())

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, "cancel"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline: %v; want DeadlineExceeded", err)
		}
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(30*time.Millisecond, cancel)
		if _, err := b.Acquire(ctx, "cancel"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v; want Canceled", err)
		}
		if got := field(t, srv, "cancel", "owner"); got != held.Owner() {
			t.Fatalf("owner = %q; want the holder's %q", got, held.Owner())
		}
	})
}

// TestAcquireCancelledMidClaim: the claim is sent to a stopped server, so
// its reply can only come after the caller gave up; whichever of the claim
// and its cleanup the server runs first, no owner is left.
func TestAcquireCancelledMidClaim(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		key := "mid"
		_, err := lk.TryAcquire(t.Context(), "warm") // load the scripts
		require.NoError(t, err)
		resume := srv.PauseOnce()
		defer resume()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := lk.Acquire(ctx, key)
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		resume()
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire: %v; want DeadlineExceeded", err)
		}
		time.Sleep(50 * time.Millisecond) // let a late claim land, if it were to
		if got := field(t, srv, key, "owner"); got != "" {
			t.Fatalf("owner = %q after a cancelled Acquire; want none", got)
		}
		l, err := lk.TryAcquire(t.Context(), key)
		if err != nil {
			t.Fatalf("TryAcquire after the cancelled one: %v", err)
		}
		_ = l.Release(t.Context())
	})
}

func TestAutoRenewAndLoss(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n)
		l, err := lk.Acquire(ctx, "renew", option.TTL(150*time.Millisecond), option.AutoRenew(true))
		require.NoError(t, err)
		lctx := l.Context(ctx)
		time.Sleep(400 * time.Millisecond)
		if err := l.Err(); err != nil {
			t.Fatalf("auto-renewed lease ended: %v", err)
		}
		// Another owner takes over on the server: the next renewal is
		// refused. (The lock is in its lean form, 'token owner'.)
		_, err = srv.Do("SET", "dlock:{renew}", l.Token().String()+" intruder", "KEEPTTL")
		require.NoError(t, err)
		select {
		case <-l.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("lease did not end after its renewal was refused")
		}
		if !errors.Is(l.Err(), lease.ErrLost) || !errors.Is(context.Cause(lctx), lease.ErrLost) {
			t.Fatalf("Err = %v, cause = %v; want ErrLost", l.Err(), context.Cause(lctx))
		}
		if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release of a lost lease: %v; want ErrNotHeld", err)
		}
		if got := field(t, srv, "renew", "owner"); got != "intruder" {
			t.Fatalf("owner = %q; want intruder", got)
		}

		// Release stops the renewal and ends the lease with ErrReleased.
		l, err = lk.Acquire(ctx, "renew2", option.TTL(150*time.Millisecond), option.AutoRenew(true))
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if !errors.Is(l.Err(), lease.ErrReleased) {
			t.Fatalf("Err = %v; want ErrReleased", l.Err())
		}
		if got := field(t, srv, "renew2", "owner"); got != "" {
			t.Fatalf("owner = %q after Release; want none", got)
		}
	})
}

func TestLocalValidity(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n, option.DriftFactor(0.1))
		before := time.Now()
		l, err := lk.TryAcquire(ctx, "valid", option.TTL(time.Second))
		after := time.Now()
		require.NoError(t, err)
		defer l.Release(ctx)
		// The validity counts from the attempt's start, somewhere between
		// before and after (a loaded machine may put milliseconds between
		// before and the start): TTL less the drift, less the time since.
		valid := time.Second - settings.Drift(time.Second, 0.1)
		got := l.TTL()
		now := time.Now()
		if lo, hi := valid-now.Sub(before), valid-now.Sub(after)+time.Millisecond; got < lo || got > hi || got <= 0 {
			t.Fatalf("TTL = %v; want in [%v, %v] (the TTL less the drift, %v, less the time since the attempt began)", got, lo, hi, valid)
		}
		// In the lean form the key expires with the lease: the server's
		// TTL, no less than the client counts.
		pttl := func() int64 {
			ttl, _ := srv.Do("PTTL", "dlock:{valid}")
			ms, err := strconv.ParseInt(ttl, 10, 64)
			require.NoError(t, err, "PTTL %q", ttl)
			return ms
		}
		if ms := pttl(); ms < l.TTL().Milliseconds() || ms > time.Second.Milliseconds() {
			t.Fatalf("PTTL of the held key = %d ms; want within [%v, 1s]", ms, l.TTL())
		}
		// Released, the counter stays for the idle TTL.
		require.NoError(t, l.Release(ctx))
		if ms := pttl(); ms <= settings.DefaultIdleTTL.Milliseconds()-1000 || ms > settings.DefaultIdleTTL.Milliseconds() {
			t.Fatalf("PTTL of the released key = %d ms; want about the idle TTL, %v", ms, settings.DefaultIdleTTL)
		}

		// In the hash (a waiter once queued), the hash, with its counter,
		// outlives the lease by at least the idle TTL, and at most one and
		// a half times the lease's TTL and the idle TTL (see keep in
		// internal/engine/lua/keep.lua).
		require.NoError(t, srv.LockHash("dlock:{valid}"))
		l2, err := lk.TryAcquire(ctx, "valid", option.TTL(time.Second))
		require.NoError(t, err)
		defer l2.Release(ctx)
		if until := field(t, srv, "valid", "until"); until == "" {
			t.Fatal("no until in the hash")
		}
		if ms := pttl(); ms <= (time.Second+settings.DefaultIdleTTL).Milliseconds() ||
			ms > 3*(time.Second+settings.DefaultIdleTTL).Milliseconds()/2 {
			t.Fatalf("PTTL of the hash = %d; want past the lease's TTL and the idle TTL (%v), within 1.5 times that", ms, settings.DefaultIdleTTL)
		}
	})
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	for _, tc := range []struct {
		name string
		n    node.Node
		opts []option.Option
		arg  string
	}{
		{"nil node", nil, nil, "node"},
		{"tiny ttl", n, []option.Option{option.TTL(3 * time.Millisecond)}, "TTL"},
		{"drift", n, []option.Option{option.DriftFactor(0.5)}, "DriftFactor"},
		{"replicas", n, []option.Option{option.Replicas(-1, time.Second)}, "Replicas"},
		{"replica timeout", n, []option.Option{option.Replicas(1, 0)}, "ReplicaTimeout"},
		{"retry", n, []option.Option{option.Retry(2*time.Second, time.Second)}, "Retry"},
	} {
		_, err := single.New(tc.n, tc.opts...)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(%s) = %v; want *ArgError for %s", tc.name, err, tc.arg)
		}
	}

	// A zero TTL is the default, as every setting's zero is.
	lk := newLocker(t, n, option.TTL(0))
	ctx := t.Context()
	if l, err := lk.TryAcquire(ctx, "zero-ttl"); err != nil || l.TTL() <= settings.DefaultTTL-time.Second || l.TTL() > settings.DefaultTTL {
		t.Errorf("TryAcquire on New(TTL 0) = %v, %v; want a lease of the default TTL", l, err)
	} else {
		require.NoError(t, l.Release(ctx))
	}
	for _, tc := range []struct {
		name string
		key  string
		opts []option.Option
		arg  string
	}{
		{"empty key", "", nil, "key"},
		{"negative ttl", "k", []option.Option{option.TTL(-time.Second)}, "TTL"},
		{"tiny ttl", "k", []option.Option{option.TTL(time.Millisecond)}, "TTL"},
		{"retry", "k", []option.Option{option.Retry(time.Second, time.Millisecond)}, "Retry"},
	} {
		for name, call := range map[string]func(context.Context, string, ...option.Option) (*lease.Lease, error){
			"Acquire": lk.Acquire, "TryAcquire": lk.TryAcquire,
		} {
			_, err := call(ctx, tc.key, tc.opts...)
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != tc.arg {
				t.Errorf("%s(%s) = %v; want *ArgError for %s", name, tc.name, err, tc.arg)
			}
		}
	}
	l, err := lk.TryAcquire(ctx, "k")
	require.NoError(t, err)
	defer l.Release(ctx)
	if err := l.Extend(ctx, 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Extend(0) = %v; want ErrInvalid", err)
	}
}

// BenchmarkHandoff measures the time from a release to the waiter's lease.
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range redistest.Nodes(b, srv.Addr()) {
		b.Run(c.Name, func(b *testing.B) {
			lk := newLocker(b, c.Node)
			ctx := context.Background()
			var total time.Duration
			for b.Loop() {
				held, err := lk.TryAcquire(ctx, "handoff")
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan time.Time, 1)
				var next *lease.Lease
				go func() {
					next, _ = lk.Acquire(ctx, "handoff", option.Retry(time.Second, time.Second))
					got <- time.Now()
				}()
				waitSubscribed(b, srv, "dlock:{handoff}:released")
				t0 := time.Now()
				_ = held.Release(ctx)
				total += (<-got).Sub(t0)
				if next == nil {
					b.Fatal("waiter got no lease")
				}
				_ = next.Release(ctx)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-handoff/op")
		})
	}
}
