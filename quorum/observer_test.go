package quorum_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// acquisition checks that ev is one acquisition of key: started, votes,
// ended with an error matching want (nil for a grant). It returns the
// outcome of each node's last vote, by node name.
func acquisition(t *testing.T, ev []observe.Event, key string, want error) map[string]string {
	t.Helper()
	if len(ev) < 2 || ev[0].Kind != observe.AcquireStarted || ev[len(ev)-1].Kind != observe.AcquireEnded {
		t.Fatalf("events %v; want started, votes, ended", ev)
	}
	votes := make(map[string]string)
	end := ev[len(ev)-1]
	for _, e := range ev {
		if e.Strategy != "quorum" || e.Key != key {
			t.Errorf("event %v: strategy %q, key %q; want quorum, %s", e.Kind, e.Strategy, e.Key, key)
		}
		if e.Kind != observe.Vote {
			continue
		}
		votes[e.Node] = e.Outcome
		if e.Wait <= 0 || e.Wait > end.Wait {
			t.Errorf("vote of %s: round trip %v; want in (0, %v]", e.Node, e.Wait, end.Wait)
		}
		if (e.Outcome == "ok" || e.Outcome == "taken") != (e.Err == nil) {
			t.Errorf("vote of %s: outcome %s with error %v", e.Node, e.Outcome, e.Err)
		}
	}
	if want == nil && end.Err != nil || want != nil && !errors.Is(end.Err, want) {
		t.Errorf("ended with %v; want %v", end.Err, want)
	}
	return votes
}

func TestObserver(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		nodes := nodesOn(t, srvs, c)
		rec := &events.Recorder{}
		lk := newLocker(t, nodes, option.DurableNodes(true), option.TTL(time.Second), option.Observer(rec))
		ctx := t.Context()

		// A grant, with auto-renewal: it renews, then is released.
		l, err := lk.TryAcquire(ctx, "obs", option.AutoRenew(true))
		require.NoError(t, err)
		votes := acquisition(t, rec.Take(), "obs", nil)
		ok := 0
		for _, o := range votes {
			if o == "ok" {
				ok++
			}
		}
		if ok < 3 {
			t.Errorf("votes %v; want at least 3 ok", votes)
		}
		if e := rec.WaitFor(t, observe.Renewed); e.Err != nil || e.Strategy != "quorum" || e.Key != "obs" {
			t.Errorf("renewal event %+v; want a successful quorum renewal of obs", e)
		}
		require.NoError(t, l.Release(ctx))
		if e := rec.WaitFor(t, observe.Released); e.Err != nil {
			t.Errorf("release event with %v", e.Err)
		}

		// A lease whose lock vanishes is lost at its next renewal.
		l, err = lk.TryAcquire(ctx, "gone", option.AutoRenew(true))
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // let the slowest votes land
		for _, s := range srvs {
			do(t, s, "DEL", "dlock:{gone}:lock")
		}
		if e := rec.WaitFor(t, observe.Lost); !errors.Is(e.Err, lease.ErrLost) {
			t.Errorf("lost event with %v; want ErrLost", e.Err)
		}
		_ = l.Release(ctx)
		rec.Take()

		// One answer of each kind: held by another, two votes, a failed
		// script (a counter that is no number), a hung node; the attempt
		// waits for all five.
		do(t, srvs[0], "SET", "dlock:{mix}:lock", "someone-else", "PX", "60000")
		do(t, srvs[3], "SET", "dlock:{mix}:fence", "garbage")
		srvs[4].Pause()
		_, err = lk.TryAcquire(ctx, "mix")
		srvs[4].Resume()
		var qe *quorum.Error
		if !errors.As(err, &qe) || errors.Is(err, lease.ErrTaken) {
			t.Fatalf("err = %v; want a quorum.Error, not taken", err)
		}
		votes = acquisition(t, rec.Take(), "mix", err)
		want := map[string]string{
			srvs[0].Addr(): "taken", srvs[1].Addr(): "ok", srvs[2].Addr(): "ok",
			srvs[3].Addr(): "error", srvs[4].Addr(): "timeout",
		}
		for n, o := range want {
			if votes[n] != o {
				t.Errorf("vote of %s = %q; want %q (all: %v)", n, votes[n], o, votes)
			}
		}

		// Acquire reports one start and one end around all its attempts.
		for _, s := range srvs[:3] {
			do(t, s, "SET", "dlock:{held}:lock", "someone-else", "PX", "60000")
		}
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err = lk.Acquire(wctx, "held")
		if !errors.Is(err, lease.ErrTaken) {
			t.Errorf("Acquire of a held lock: %v; want ErrTaken", err)
		}
		ev := rec.Take()
		acquisition(t, ev, "held", context.DeadlineExceeded)
		if n := slices.IndexFunc(ev[1:], func(e observe.Event) bool { return e.Kind != observe.Vote }); n != len(ev)-2 {
			t.Errorf("events %v; want one start, votes, one end", ev)
		}
		if e := ev[len(ev)-1]; e.Wait < 250*time.Millisecond || e.Err != err {
			t.Errorf("end of Acquire: wait %v, err %v; want about 300ms and the error returned (%v)", e.Wait, e.Err, err)
		}
	})
}

// TestObserverLostData: a guarded Locker over nodes it has just met
// reports every vote as lost data.
func TestObserverLostData(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	rec := &events.Recorder{}
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.TTL(time.Second), option.Observer(rec))
	for start := time.Now(); ; {
		_, err := lk.TryAcquire(t.Context(), "fresh")
		votes := acquisition(t, rec.Take(), "fresh", err)
		lost := 0
		for _, o := range votes {
			if o == "sits_out" {
				lost++
			}
			if o == "ok" {
				t.Fatalf("a fresh node's vote counted: %v", votes)
			}
		}
		if lost >= 2 {
			break
		}
		// A first call on a loaded machine may time out (scripts load).
		if time.Since(start) > 2*time.Second {
			t.Fatalf("votes %v; want lost data", votes)
		}
	}
}
