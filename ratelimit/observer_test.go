package ratelimit_test

import (
	"context"
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
	"github.com/dlockgo/dlock/ratelimit"
)

// TestObserver: each call reports one RateDecided event when it ends, with
// its key, outcome and time, on one server and on a quorum, both clients;
// a Wait reports once however many tries it took.
func TestObserver(t *testing.T) {
	for _, client := range redistest.Clients {
		for _, size := range []int{1, 3} {
			t.Run(client+"/"+map[int]string{1: "single", 3: "quorum"}[size], func(t *testing.T) {
				ctx := t.Context()
				srvs := redistest.StartN(t, size)
				rec := &events.Recorder{}
				lim := newLimiter(t, nodesFor(t, client, srvs),
					ratelimit.Limit{Rate: 20, Per: time.Second, Burst: 1},
					option.Observer(rec), slowMachine)

				r, err := lim.Allow(ctx, "obs")
				require.NoError(t, err)
				require.True(t, r.Allowed)
				r, err = lim.Allow(ctx, "obs")
				require.NoError(t, err)
				require.False(t, r.Allowed)
				_, errN := lim.AllowN(ctx, "obs", 2) // above the burst
				require.ErrorIs(t, errN, lease.ErrInvalid)
				r, err = lim.Wait(ctx, "obs") // about 50 ms, likely in two tries or more
				require.NoError(t, err)
				require.True(t, r.Allowed)
				short, cancel := context.WithTimeout(ctx, time.Millisecond)
				defer cancel()
				_, errW := lim.Wait(short, "obs")
				require.ErrorIs(t, errW, context.DeadlineExceeded)

				ev := rec.Take()
				want := []string{"allowed", "refused", "invalid", "allowed", "canceled"}
				got := make([]string, len(ev))
				for i, e := range ev {
					got[i] = e.Outcome
					if e.Kind != observe.RateDecided || e.Strategy != "ratelimit" || e.Key != "obs" {
						t.Errorf("event %d: kind %v, strategy %q, key %q; want rate_decided, ratelimit, obs", i, e.Kind, e.Strategy, e.Key)
					}
				}
				require.Equal(t, want, got, "outcomes, one per call")
				if ev[2].Err != errN || ev[4].Err != errW || ev[0].Err != nil || ev[3].Err != nil {
					t.Errorf("errors %v, %v, %v, %v; want nil, the returned %v, nil, the returned %v",
						ev[0].Err, ev[2].Err, ev[3].Err, ev[4].Err, errN, errW)
				}
				// The Wait slept until the next admission, ~50 ms after the first.
				if ev[0].Wait <= 0 || ev[3].Wait < 20*time.Millisecond {
					t.Errorf("times %v (Allow), %v (Wait); want > 0, and >= 20ms for the Wait", ev[0].Wait, ev[3].Wait)
				}

				// A call the servers could not decide is an error.
				for _, s := range srvs {
					s.Kill()
				}
				_, err = lim.Allow(ctx, "obs")
				require.Error(t, err)
				ev = rec.Take()
				require.Len(t, ev, 1)
				if ev[0].Outcome != "error" || !errors.Is(ev[0].Err, err) {
					t.Errorf("a call to stopped servers: outcome %q, err %v; want error, %v", ev[0].Outcome, ev[0].Err, err)
				}
			})
		}
	}
}

// TestObserverNone: without an Observer nothing is reported, and a nil one
// given is the same.
func TestObserverNone(t *testing.T) {
	srv := redistest.Start(t)
	lim := newLimiter(t, []node.Node{redistest.NodeFor(t, "go-redis", srv.Addr())},
		ratelimit.Limit{Rate: 1, Per: time.Second}, option.Observer(nil))
	r, err := lim.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
}
