package dlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestResumeOpened: the Lockers Open returns resume and break, on both
// strategies and clients, and refuse another strategy's handle for the
// same servers.
func TestResumeOpened(t *testing.T) {
	ctx := t.Context()
	srvs := redistest.StartN(t, 3)
	addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	open := func(strategy, client string, addrs []string) dlock.Locker {
		t.Helper()
		l, err := dlock.Open(ctx, dlock.Config{Strategy: strategy, Addrs: addrs, Client: client, DurableNodes: strategy == dlock.StrategyQuorum})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	for _, st := range []struct {
		strategy string
		addrs    []string
	}{{dlock.StrategySingle, addrs[:1]}, {dlock.StrategyQuorum, addrs}} {
		t.Run(st.strategy, func(t *testing.T) {
			a := open(st.strategy, dlock.ClientGoRedis, st.addrs)
			b := open(st.strategy, dlock.ClientValkeyGo, st.addrs)
			key := "resume-" + st.strategy
			l, err := a.Acquire(ctx, key, option.TTL(5*time.Second))
			require.NoError(t, err)
			h, err := l.Handle()
			require.NoError(t, err)
			r, err := dlock.Resume(ctx, b, h.String())
			require.NoError(t, err)
			require.Equal(t, l.Token(), r.Token())

			// The other strategy on the same first server: a foreign handle.
			other := dlock.StrategyQuorum
			if st.strategy == other {
				other = dlock.StrategySingle
			}
			otherAddrs := addrs
			if other == dlock.StrategySingle {
				otherAddrs = addrs[:1]
			}
			if _, err := dlock.Resume(ctx, open(other, dlock.ClientGoRedis, otherAddrs), h.String()); !errors.Is(err, dlock.ErrForeignHandle) || !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("Resume by the other strategy: %v; want ErrForeignHandle", err)
			} else {
				t.Log(err)
			}

			br, err := dlock.ForceRelease(ctx, b, key)
			require.NoError(t, err)
			if !br.Held || br.Owner != l.Owner() || br.Token <= l.Token() {
				t.Fatalf("Broken = %+v; want the lease's owner, a token above %v", br, l.Token())
			}
			for _, ls := range []*lease.Lease{l, r} {
				if err := ls.Extend(ctx, time.Second); !errors.Is(err, dlock.ErrNotHeld) {
					t.Fatalf("Extend after the break: %v; want ErrNotHeld", err)
				}
			}
		})
	}
}

// notResumer is a Locker of a user's own, which neither resumes nor breaks.
type notResumer struct{ dlock.Locker }

func TestResumeArgs(t *testing.T) {
	ctx := t.Context()
	var lk notResumer
	if _, err := dlock.Resume(ctx, lk, "dlock1.x.y"); !errors.Is(err, dlock.ErrInvalid) || !strings.Contains(err.Error(), "locker") {
		t.Fatalf("Resume on a Locker that cannot: %v; want an ArgError naming locker", err)
	}
	if _, err := dlock.ForceRelease(ctx, lk, "k"); !errors.Is(err, dlock.ErrInvalid) || !strings.Contains(err.Error(), "locker") {
		t.Fatalf("ForceRelease on a Locker that cannot: %v; want an ArgError naming locker", err)
	}
	srv := redistest.Start(t)
	l, err := dlock.Open(ctx, dlock.Config{Addrs: []string{srv.Addr()}})
	require.NoError(t, err)
	defer l.Close()
	var ae *lease.ArgError
	if _, err := dlock.Resume(ctx, l, "not a handle"); !errors.As(err, &ae) || ae.Arg != "handle" {
		t.Fatalf("Resume of a bad handle: %v; want an ArgError naming handle", err)
	}
}
