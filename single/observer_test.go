package single_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

func sameKinds(got []observe.Event, want ...observe.EventKind) bool {
	k := events.Kinds(got)
	if len(k) != len(want) {
		return false
	}
	for i := range k {
		if k[i] != want[i] {
			return false
		}
	}
	return true
}

func TestObserver(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		rec := &events.Recorder{}
		lk := newLocker(t, n, option.Observer(rec))

		// A grant, then a refusal while it is held.
		l, err := lk.TryAcquire(ctx, "obs")
		require.NoError(t, err)
		_, errTaken := lk.TryAcquire(ctx, "obs")
		if !errors.Is(errTaken, lease.ErrTaken) {
			t.Fatalf("second TryAcquire: %v; want ErrTaken", errTaken)
		}
		ev := rec.Take()
		if !sameKinds(ev, observe.AcquireStarted, observe.AcquireEnded, observe.AcquireStarted, observe.AcquireEnded) {
			t.Fatalf("events %v; want started, ended, started, ended", events.Kinds(ev))
		}
		for _, e := range ev {
			if e.Strategy != "single" || e.Key != "obs" {
				t.Errorf("event %v: strategy %q, key %q; want single, obs", e.Kind, e.Strategy, e.Key)
			}
		}
		if ev[1].Err != nil || observe.Outcome(ev[1].Err) != "acquired" || ev[1].Wait <= 0 {
			t.Errorf("first AcquireEnded: err %v, wait %v; want acquired in > 0", ev[1].Err, ev[1].Wait)
		}
		if ev[3].Err != errTaken || observe.Outcome(ev[3].Err) != "taken" {
			t.Errorf("second AcquireEnded: err %v; want the returned %v", ev[3].Err, errTaken)
		}

		// A blocking Acquire: Wait counts the whole wait, here until the
		// holder releases 100 ms later.
		const hold = 100 * time.Millisecond
		released := make(chan struct{})
		time.AfterFunc(hold, func() {
			defer close(released)
			_ = l.Release(ctx)
		})
		l2, err := lk.Acquire(ctx, "obs", option.TTL(300*time.Millisecond), option.AutoRenew(true))
		require.NoError(t, err)
		<-released
		// The new lease renews every 100 ms from its grant, which on a
		// loaded machine may come before its AcquireEnded is reported or
		// this take runs: renewals are checked below, not here.
		ev = events.Without(rec.Take(), observe.Renewed)
		// The holder reports its release after the server took it, so the
		// waiter's end may be reported first.
		if len(ev) == 3 && ev[1].Kind == observe.AcquireEnded {
			ev[1], ev[2] = ev[2], ev[1]
		}
		if !sameKinds(ev, observe.AcquireStarted, observe.Released, observe.AcquireEnded) {
			t.Fatalf("events %v; want started, then released (the holder's) and ended", events.Kinds(ev))
		}
		if ev[1].Err != nil {
			t.Errorf("Released: err %v; want nil", ev[1].Err)
		}
		if w := ev[2].Wait; w < hold-10*time.Millisecond || ev[2].Err != nil {
			t.Errorf("AcquireEnded after a wait: wait %v, err %v; want >= %v, nil", w, ev[2].Err, hold)
		}

		// Renewals, then the loss when another owner takes over.
		for deadline := time.Now().Add(2 * time.Second); !rec.Has(observe.Renewed, nil); {
			if time.Now().After(deadline) {
				t.Fatal("no successful renewal reported")
			}
			time.Sleep(5 * time.Millisecond)
		}
		_, err = srv.Do(redistest.StealArgs("dlock:{obs}", "intruder")...)
		require.NoError(t, err)
		select {
		case <-l2.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("lease did not end after its renewal was refused")
		}
		// Release stops the renewal goroutine, so its events are all in; it
		// ends nothing, so it reports nothing.
		if err := l2.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release of a lost lease: %v; want ErrNotHeld", err)
		}
		ev = rec.Take()
		var renewed, refused, lost int
		for _, e := range ev {
			switch e.Kind {
			case observe.Renewed:
				if e.Err == nil {
					renewed++
				} else if errors.Is(e.Err, lease.ErrNotHeld) {
					refused++
				}
			case observe.Released:
				t.Errorf("Released reported for a lease lost before its Release")
			case observe.Lost:
				lost++
				if !errors.Is(e.Err, lease.ErrLost) {
					t.Errorf("Lost: err %v; want ErrLost", e.Err)
				}
			}
			if e.Strategy != "single" || e.Key != "obs" {
				t.Errorf("event %v: strategy %q, key %q; want single, obs", e.Kind, e.Strategy, e.Key)
			}
		}
		if renewed == 0 || refused != 1 || lost != 1 {
			t.Errorf("events %v; want successful renewals, then one refused renewal and one loss", events.Kinds(ev))
		}

		// A bad argument is an acquisition too, and its outcome "invalid".
		if _, err := lk.TryAcquire(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("TryAcquire(\"\"): %v; want ErrInvalid", err)
		}
		ev = rec.Take()
		if !sameKinds(ev, observe.AcquireStarted, observe.AcquireEnded) || observe.Outcome(ev[1].Err) != "invalid" {
			t.Errorf("events %v; want started, ended with outcome invalid", events.Kinds(ev))
		}
	})
}
