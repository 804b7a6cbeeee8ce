package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/lease"
)

// longTTL is far beyond every wait of these tests: an observer that
// reports a change within one learned it from an announcement, not from
// the lease's expiry.
const longTTL = time.Minute

// TestObserve: an observer gets the office as it is, then each term and
// vacancy as they happen; with leases of a minute, only the terms'
// announcements can tell it of a resignation within the test's bound.
func TestObserve(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("observe")
		conf := lockerConf{ttl: longTTL}
		obs := observe(t, newElection(t, e.locker(t, conf), name))
		if l := next(t, obs); l != (election.Leader{}) {
			t.Fatalf("first observed: %+v; want a vacancy", l)
		}

		a := campaign(t, newElection(t, e.locker(t, conf), name), "a")
		la := nextLeader(t, obs, "a")
		if la.Token != a.Token() || la.TTL <= 0 || la.TTL > longTTL {
			t.Fatalf("observed %+v; want token %d and a TTL up to %v", la, a.Token(), longTTL)
		}

		// B waits; A resigns: the office passes to B, with at most a
		// vacancy observed between.
		bEl := newElection(t, e.locker(t, conf), name)
		bc := make(chan *election.Term, 1)
		go func() {
			term, err := bEl.Campaign(ctx, "b")
			if err != nil {
				t.Errorf("B's campaign: %v", err)
			}
			bc <- term
		}()
		e.waitQueued(t, bEl.Key(), 1)
		require.NoError(t, a.Resign(ctx))
		lb := nextLeader(t, obs, "b")
		b := <-bc
		if b == nil {
			return
		}
		if lb.Token != b.Token() || lb.Token <= la.Token {
			t.Fatalf("observed %+v; want B's token %d, above A's %d", lb, b.Token(), la.Token)
		}

		// B resigns with nobody waiting: a vacancy, though B's lease had
		// most of a minute left.
		require.NoError(t, b.Resign(ctx))
		if l := next(t, obs); l != (election.Leader{}) {
			t.Fatalf("observed after the last Resign: %+v; want a vacancy", l)
		}
	})
}

// TestObserveDeadLeader: a leader cut off from the servers announces
// nothing; observers learn of the vacancy when its lease runs out, and of
// the next leader when it is elected.
func TestObserveDeadLeader(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("dead")
		conf := lockerConf{ttl: time.Second}
		obs := observe(t, newElection(t, e.locker(t, conf), name))
		next(t, obs) // the vacancy at the start

		alk, links := e.cuttable(t, conf)
		a := campaign(t, newElection(t, alk, name), "a")
		nextLeader(t, obs, "a")
		links.cut()
		if l := next(t, obs); l != (election.Leader{}) {
			t.Fatalf("observed after the leader was cut off: %+v; want a vacancy", l)
		}
		ended(t, a)
		if err := a.Err(); !errors.Is(err, lease.ErrExpired) && !errors.Is(err, lease.ErrLost) {
			t.Fatalf("dead leader's term ended with %v; want ErrExpired or ErrLost", err)
		}

		b := campaign(t, newElection(t, e.locker(t, conf), name), "b")
		if l := nextLeader(t, obs, "b"); l.Token != b.Token() || l.Token <= a.Token() {
			t.Fatalf("observed %+v; want B's token %d, above A's %d", l, b.Token(), a.Token())
		}
		links.restore()
		// A client whose connection the cut broke may fail its first
		// call after the restore; the Resign under test comes once the
		// link answers again.
		waitLinked(t, alk, election.KeyPrefix+name)
		if err := a.Resign(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("dead leader's Resign: %v; want ErrNotHeld", err)
		}
		require.NoError(t, b.Resign(ctx))
	})
}

// TestObserveMissedAnnouncement: an observer that missed a new leader's
// announcement (its link to the servers dropped it) learns of the leader
// from the next one, which the leader repeats at about half its lease's
// time left; nothing else would tell it, the office having been vacant.
func TestObserveMissedAnnouncement(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("missed")
		conf := lockerConf{ttl: time.Second}
		olk, links := e.cuttable(t, conf)
		obs := observe(t, newElection(t, olk, name))
		next(t, obs) // the vacancy at the start

		// A witness sees the announcement go out while the observer is
		// cut off.
		wlk := e.locker(t, conf)
		watch, stop, err := wlk.Watch(ctx, election.KeyPrefix+name)
		require.NoError(t, err)
		defer stop()
		links.cut()
		b := campaign(t, newElection(t, e.locker(t, conf), name), "b")
		select {
		case m := <-watch:
			if !strings.HasPrefix(m, "elected "+b.Token().String()) {
				t.Fatalf("announcement %q; want B's election", m)
			}
		case <-time.After(wait):
			t.Fatal("no announcement")
		}
		links.restore()
		if l := nextLeader(t, obs, "b"); l.Token != b.Token() {
			t.Fatalf("observed %+v; want B's token %d", l, b.Token())
		}
		require.NoError(t, b.Resign(ctx))
	})
}

// TestObserveEnds: an observer's channel closes when its context ends,
// and its subscription on the servers goes with it.
func TestObserveEnds(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		name := e.office("ends")
		el := newElection(t, e.locker(t, lockerConf{}), name)
		ctx, cancel := context.WithCancel(t.Context())
		obs, err := el.Observe(ctx)
		require.NoError(t, err)
		next(t, obs)
		channel := keyname.Single(el.Key()) + ":notice"
		require.Equal(t, "1", numsub(t, e, channel), "subscribers while observing")
		cancel()
		select {
		case _, ok := <-obs:
			if ok {
				for range obs {
				}
			}
		case <-time.After(wait):
			t.Fatal("channel still open after the context ended")
		}
		deadline := time.Now().Add(wait)
		for numsub(t, e, channel) != "0" {
			if time.Now().After(deadline) {
				t.Fatalf("subscribers after the observer ended: %s; want 0", numsub(t, e, channel))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
