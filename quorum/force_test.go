package quorum_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

func TestHandleAcrossLockers(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		a := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(5*time.Second))
		// Another process: other clients, the nodes listed in another order.
		rev := slices.Clone(srvs)
		slices.Reverse(rev)
		b := newLocker(t, nodesOn(t, rev, redistest.OtherClient(c)), option.DurableNodes(true), option.TTL(5*time.Second))

		l, err := a.Acquire(ctx, "h", option.Metadata("job=7"))
		require.NoError(t, err)
		h, err := l.Handle()
		require.NoError(t, err)
		text := h.String()
		parsed, err := lease.ParseHandle(text)
		require.NoError(t, err)
		if parsed != h {
			t.Fatalf("ParseHandle(String()) = %+v; want %+v", parsed, h)
		}

		r, err := b.Resume(ctx, parsed.String())
		require.NoError(t, err, "Resume")
		if r.Token() != l.Token() || r.Owner() != l.Owner() || r.Metadata() != "job=7" || r.Key() != "h" {
			t.Fatalf("resumed %q token %v; want %q token %v", r.Key(), r.Token(), "h", l.Token())
		}
		if ttl := r.TTL(); ttl <= 3*time.Second || ttl > 5*time.Second {
			t.Fatalf("resumed TTL() = %v; want what a majority has left, under 5s", ttl)
		}
		require.NoError(t, r.Extend(ctx, 4*time.Second), "Extend of the resumed lease")
		require.NoError(t, l.Extend(ctx, 4*time.Second), "Extend of the original")
		require.NoError(t, r.Release(ctx), "Release of the resumed lease")
		if got := eventuallyNoLock(t, srvs, "h"); len(got) != 0 {
			t.Fatalf("lock left on %v after the resumed release", got)
		}
		if err := l.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Extend of the original after the release: %v; want ErrNotHeld", err)
		}
		if _, err := b.Resume(ctx, parsed.String()); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Resume of an ended lease: %v; want ErrNotHeld", err)
		}

		// Another Locker's handle: other nodes, or a node fewer.
		other := newLocker(t, nodesOn(t, redistest.StartN(t, 3), c), option.DurableNodes(true))
		fewer := newLocker(t, nodesOn(t, srvs[:2], c), option.DurableNodes(true))
		l2, err := a.TryAcquire(ctx, "h2")
		require.NoError(t, err)
		defer l2.Release(ctx)
		h2, err := l2.Handle()
		require.NoError(t, err)
		for _, lk := range []*quorum.Locker{other, fewer} {
			if _, err := lk.Resume(ctx, h2.String()); !errors.Is(err, lease.ErrForeignHandle) || !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("Resume by another Locker: %v; want ErrForeignHandle", err)
			}
		}
		single := h2
		single.Strategy = "single"
		if _, err := b.Resume(ctx, single.String()); !errors.Is(err, lease.ErrForeignHandle) {
			t.Fatalf("Resume of a single handle: %v; want ErrForeignHandle", err)
		}
		// Edited by hand.
		txt := h2.String()
		i := len(txt) - 1
		if _, err := lease.ParseHandle(txt[:i] + string(txt[i]^1)); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("ParseHandle of an edited handle: %v; want ErrInvalid", err)
		}
		// A set is not written out.
		set, err := a.TryAcquireAll(ctx, []string{"s1", "s2"})
		require.NoError(t, err)
		defer set.Release(ctx)
		if _, err := set.Handle(); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Handle of a set: %v; want ErrInvalid", err)
		}
	})
}

func TestForceRelease(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(time.Second)}
		holder := newLocker(t, nodesOn(t, srvs, c), opts...)
		waiter := newLocker(t, nodesOn(t, srvs, c), opts...)
		rec := &events.Recorder{}
		op := newLocker(t, nodesOn(t, srvs, redistest.OtherClient(c)), append(opts, option.Observer(rec))...)
		store := fence.NewStore(nodesOn(t, srvs[:1], c)[0])
		var guard fence.Guard

		l, err := holder.Acquire(ctx, "k", option.AutoRenew(true), option.Metadata("host=a"))
		require.NoError(t, err)
		require.NoError(t, guard.Admit("k", l.Token()))
		require.NoError(t, store.Put(ctx, "data:k", "old", l.Token()))

		type res struct {
			l   *lease.Lease
			err error
		}
		got := make(chan res, 1)
		go func() {
			// A slow retry: only the break's published release wakes it soon.
			w, err := waiter.Acquire(ctx, "k", option.Retry(20*time.Second, 20*time.Second))
			got <- res{w, err}
		}()
		require.Eventually(t, func() bool {
			return do(t, srvs[0], "ZCARD", "dlock:{k}:queue") == "1"
		}, 5*time.Second, 5*time.Millisecond, "waiter queued")

		br, err := op.ForceRelease(ctx, "k")
		require.NoError(t, err, "ForceRelease")
		t.Logf("broken: %+v", br)
		if !br.Held || br.Owner != l.Owner() || br.Metadata != "host=a" || br.Was != l.Token() || br.Token <= l.Token() {
			t.Fatalf("Broken = %+v; want held by %s (host=a) at %v, and a token above", br, l.Owner()[:8], l.Token())
		}
		if ev := rec.Take(); !slices.ContainsFunc(ev, func(e observe.Event) bool { return e.Kind == observe.ForceReleased && e.Err == nil }) {
			t.Fatalf("observer heard %v; want a ForceReleased", ev)
		}

		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the holder's lease did not end after the break")
		}
		if err := l.Err(); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("holder's lease ended with %v; want ErrLost", err)
		}

		require.NoError(t, guard.Admit("k", br.Token), "guard, the break's token")
		require.NoError(t, store.Put(ctx, "data:k", "break", br.Token), "store, the break's token")
		if err := guard.Admit("k", l.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("guard, old holder: %v; want ErrStale", err)
		}
		if err := store.Put(ctx, "data:k", "late", l.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("store, old holder: %v; want ErrStale", err)
		}

		var next *lease.Lease
		select {
		case r := <-got:
			require.NoError(t, r.err, "the waiter")
			next = r.l
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not woken by the break")
		}
		defer next.Release(ctx)
		if next.Token() <= br.Token {
			t.Fatalf("next holder's token %v; want above the break's %v", next.Token(), br.Token)
		}
	})
}

func TestForceReleaseFree(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.DurableNodes(true), option.TTL(time.Second))
		br, err := lk.ForceRelease(ctx, "nobody")
		require.NoError(t, err)
		if br.Held || br.Owner != "" || br.Was != 0 || br.Token == 0 {
			t.Fatalf("Broken of a key never locked = %+v; want not held, a token", br)
		}
		if got := eventuallyNoLock(t, srvs, "nobody"); len(got) != 0 {
			t.Fatalf("the break left its lock on %v", got)
		}
		again, err := lk.ForceRelease(ctx, "nobody")
		require.NoError(t, err)
		if again.Held || again.Was != br.Token || again.Token <= br.Token {
			t.Fatalf("second break = %+v; want not held, was %v, a token above it", again, br.Token)
		}
		l, err := lk.TryAcquire(ctx, "nobody")
		require.NoError(t, err, "the key stays free to claim")
		if l.Token() <= again.Token {
			t.Fatalf("token %v after breaks; want above %v", l.Token(), again.Token)
		}
		require.NoError(t, l.Release(ctx))

		// Without a majority the break fails, and says so.
		srvs[1].Kill()
		srvs[2].Kill()
		var qe *quorum.Error
		if _, err := lk.ForceRelease(ctx, "nobody"); !errors.As(err, &qe) || qe.Op != "force release" {
			t.Fatalf("ForceRelease with one node of three: %v; want a quorum.Error", err)
		}
	})
}

// TestForceReleaseGuarded: with the lost-data guard on, a break counts
// only nodes that vote: none while fresh nodes sit out, a majority once
// they have; and without tokens it breaks the lock with no token to give.
func TestForceReleaseGuarded(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(time.Second))
		var se *quorum.SitOutError
		if _, err := lk.ForceRelease(ctx, "g"); !errors.As(err, &se) {
			t.Fatalf("ForceRelease while fresh nodes sit out: %v; want a SitOutError", err)
		}
		l, err := lk.Acquire(ctx, "g", option.AutoRenew(true)) // waits out the sit-out
		require.NoError(t, err)
		br, err := lk.ForceRelease(ctx, "g")
		require.NoError(t, err)
		if !br.Held || br.Owner != l.Owner() || br.Token <= l.Token() {
			t.Fatalf("Broken = %+v; want held by the lease, a token above %v", br, l.Token())
		}
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the holder's lease did not end after the break")
		}

		plain := newLocker(t, nodesOn(t, srvs, c), option.TTL(time.Second), option.Tokens(false))
		pl, err := plain.Acquire(ctx, "plain")
		require.NoError(t, err)
		h, err := pl.Handle()
		require.NoError(t, err)
		r, err := plain.Resume(ctx, h.String())
		require.NoError(t, err, "Resume without tokens")
		if r.Fenced() {
			t.Fatalf("resumed lease without tokens carries token %v", r.Token())
		}
		br, err = plain.ForceRelease(ctx, "plain")
		require.NoError(t, err)
		if !br.Held || br.Owner != pl.Owner() || br.Token != 0 {
			t.Fatalf("Broken without tokens = %+v; want held by the lease, no token", br)
		}
		if err := r.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Extend after the break: %v; want ErrNotHeld", err)
		}
	})
}

// TestResumeForgedToken: a quorum handle whose token was edited, its
// checksum recomputed (the format is public), is refused by the nodes with
// an error matching ErrNotHeld, whether the token was raised, lowered or
// zeroed; the real holder is still admitted by the fence and still
// extends, and its own handle still resumes, with its token. A node whose
// floor (a repair's node-wide bound) is above the lease's token changes
// neither: the check reads each key's own counter. Without tokens, a
// handle given one is refused.
func TestResumeForgedToken(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(5 * time.Second)}
		a := newLocker(t, nodesOn(t, srvs, c), opts...)
		b := newLocker(t, nodesOn(t, srvs, redistest.OtherClient(c)), opts...)

		l, err := a.Acquire(ctx, "forge")
		require.NoError(t, err)
		var guard fence.Guard
		require.NoError(t, guard.Admit("forge", l.Token()))
		h, err := l.Handle()
		require.NoError(t, err)

		forged := func(tok fence.Token) lease.Handle {
			f := h
			f.Token = tok
			p, err := lease.ParseHandle(f.String())
			require.NoError(t, err, "a re-encoded handle passes its checksum")
			return p
		}
		refuse := func(what string, tok fence.Token) {
			t.Helper()
			r, err := b.Resume(ctx, forged(tok).String())
			if err == nil {
				ext := r.Extend(ctx, 5*time.Second)
				t.Fatalf("Resume of a handle with its token %s: resumed with token %v (its Extend: %v); want ErrNotHeld", what, r.Token(), ext)
			}
			if !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("Resume of a handle with its token %s: %v; want ErrNotHeld", what, err)
			}
		}
		refuse("raised by one", l.Token()+1)
		refuse("raised by 10^12", l.Token()+1_000_000_000_000)
		refuse("raised near 2^53", 1<<53-1)
		refuse("lowered by one", l.Token()-1)
		refuse("zeroed", 0)

		require.NoError(t, guard.Admit("forge", l.Token()), "the real holder, at the fence")
		require.NoError(t, l.Extend(ctx, 5*time.Second), "the real lease's Extend")

		// A floor above the token on one node: the real handle resumes,
		// the floor's value does not.
		floor := l.Token() + 1_000_000
		do(t, srvs[0], "SET", "dlock:floor", floor.String())
		refuse("set to a node's floor", floor)
		r, err := b.Resume(ctx, h.String())
		require.NoError(t, err, "Resume of the real handle, a node's floor above its token")
		if r.Token() != l.Token() {
			t.Fatalf("resumed token %v; want the lease's %v", r.Token(), l.Token())
		}
		require.NoError(t, r.Extend(ctx, 5*time.Second), "the resumed lease's Extend")
		require.NoError(t, guard.Admit("forge", r.Token()), "the resumed lease, at the fence")
		require.NoError(t, l.Release(ctx))

		// Without tokens a lease has none: a handle given one is refused.
		plain := newLocker(t, nodesOn(t, srvs, c), append(opts, option.Tokens(false))...)
		pl, err := plain.Acquire(ctx, "plain")
		require.NoError(t, err)
		ph, err := pl.Handle()
		require.NoError(t, err)
		ph.Token = 5
		if _, err := plain.Resume(ctx, ph.String()); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Resume without tokens of a handle given token 5: %v; want ErrNotHeld", err)
		}
		require.NoError(t, pl.Release(ctx))
	})
}

// TestResumeNoQuorum: with 2 of 3 nodes stopped (SIGSTOP), Resume, Extend
// and ForceRelease (of another key) fail with a *Error that does not match
// ErrNotHeld (nor ErrTaken): the nodes did not answer, the lease did not
// end. Once the nodes continue, the lock is still held on all three, the
// handle resumes and the lease extends. A release whose one answering
// node holds the lock for another owner says the same: not ended, unknown.
func TestResumeNoQuorum(t *testing.T) {
	t.Parallel()
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(10 * time.Second)}
		a := newLocker(t, nodesOn(t, srvs, c), opts...)
		b := newLocker(t, nodesOn(t, srvs, redistest.OtherClient(c)), opts...)
		l, err := a.Acquire(ctx, "away")
		require.NoError(t, err)
		h, err := l.Handle()
		require.NoError(t, err)
		lockOnAll(t, srvs, "away") // what the faults below must leave

		resume1, resume2 := srvs[1].PauseOnce(), srvs[2].PauseOnce()
		defer resume1()
		defer resume2()
		unknown := func(what string, err error) {
			t.Helper()
			var qe *quorum.Error
			if !errors.As(err, &qe) || errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrTaken) {
				t.Fatalf("%s with 2 of 3 nodes stopped: %v; want a quorum.Error matching neither ErrNotHeld nor ErrTaken", what, err)
			}
		}
		_, err = b.Resume(ctx, h.String())
		unknown("Resume", err)
		unknown("Extend", l.Extend(ctx, 10*time.Second))
		if err := l.Err(); err != nil {
			t.Fatalf("the lease ended (%v) on an Extend the nodes did not answer", err)
		}
		// A break takes the lock from its holder wherever its phase 1
		// lands, even when it fails: it is tried on another key.
		_, err = b.ForceRelease(ctx, "away-other")
		unknown("ForceRelease", err)

		resume1()
		resume2()

		if left := lockKeysLeft(t, srvs, "away"); len(left) != 3 {
			t.Fatalf("lock held on nodes %v once they continue; want all three", left)
		}
		r, err := b.Resume(ctx, h.String())
		require.NoError(t, err, "Resume once the nodes continue")
		require.NoError(t, r.Extend(ctx, 10*time.Second), "Extend of the resumed lease")
		require.NoError(t, l.Extend(ctx, 10*time.Second), "Extend of the original")

		// Release: the one node that answers no longer holds the lock.
		resume1, resume2 = srvs[1].PauseOnce(), srvs[2].PauseOnce()
		defer resume1()
		defer resume2()
		do(t, srvs[0], "SET", "dlock:{away}:lock", "another-owner", "PX", "10000")
		unknown("Release, the answering node held by another", r.Release(ctx))
	})
}

// TestReleaseAfterBreak: the old holder's Release after a break fails
// with an error matching ErrNotHeld, as its Extend does. The break's
// phase 1 stops at a majority, so its token is committed on a majority
// only: on the node it met last, its release leaves the lock gone with
// the counter still at the old holder's token, as the old holder's own
// release run again would leave it. One such node is no release.
func TestReleaseAfterBreak(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		ctx := t.Context()
		srvs := redistest.StartN(t, 3)
		opts := []option.Option{option.DurableNodes(true), option.TTL(10 * time.Second)}
		holder := newLocker(t, nodesOn(t, srvs, c), opts...)
		op := newLocker(t, nodesOn(t, srvs, redistest.OtherClient(c)), opts...)
		for i := range 10 {
			l, err := holder.Acquire(ctx, "rel")
			require.NoError(t, err)
			// Acquire returns once a majority granted it: a vote still on
			// its way to the third node would land after the break and
			// hold the lock there until the lease's release undoes it.
			// The break is of a lock every node has granted.
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if !slices.Contains(ownersOf(t, srvs, "rel"), "") {
					break
				}
			}
			br, err := op.ForceRelease(ctx, "rel")
			require.NoError(t, err)
			if got := eventuallyNoLock(t, srvs, "rel"); len(got) != 0 {
				t.Fatalf("lock left on %v after the break", got)
			}
			if err := l.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("round %d: Release of a lease broken (token %v, break %v): %v; want ErrNotHeld", i, l.Token(), br.Token, err)
			}
		}
	})
}
