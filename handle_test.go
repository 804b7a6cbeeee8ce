package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestResumeOpened: the Clients Open returns resume and break, on both
// strategies and clients, and refuse another strategy's handle for the
// same servers.
func TestResumeOpened(t *testing.T) {
	ctx := t.Context()
	srvs := redistest.StartN(t, 3)
	addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	open := func(strategy, client string, addrs []string) *dlock.Client {
		t.Helper()
		l, err := dlock.Open(ctx, dlock.Config{Strategy: strategy, Addrs: addrs, Client: client, DurableNodes: strategy == connect.StrategyQuorum})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	for _, st := range []struct {
		strategy string
		addrs    []string
	}{{connect.StrategySingle, addrs[:1]}, {connect.StrategyQuorum, addrs}} {
		t.Run(st.strategy, func(t *testing.T) {
			a := open(st.strategy, connect.ClientGoRedis, st.addrs)
			b := open(st.strategy, connect.ClientValkeyGo, st.addrs)
			key := "resume-" + st.strategy
			l, err := a.Acquire(ctx, key, option.TTL(5*time.Second))
			require.NoError(t, err)
			h, err := l.Handle()
			require.NoError(t, err)
			r, err := b.Resume(ctx, h.String())
			require.NoError(t, err)
			require.Equal(t, l.Token(), r.Token())

			// The other strategy on the same first server: a foreign handle.
			other := connect.StrategyQuorum
			if st.strategy == other {
				other = connect.StrategySingle
			}
			otherAddrs := addrs
			if other == connect.StrategySingle {
				otherAddrs = addrs[:1]
			}
			if _, err := open(other, connect.ClientGoRedis, otherAddrs).Resume(ctx, h.String()); !errors.Is(err, dlock.ErrForeignHandle) || !errors.Is(err, dlock.ErrInvalid) {
				t.Fatalf("Resume by the other strategy: %v; want ErrForeignHandle", err)
			} else {
				t.Log(err)
			}

			br, err := b.ForceRelease(ctx, key)
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

func TestResumeArgs(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	l, err := dlock.Open(ctx, dlock.Config{Addrs: []string{srv.Addr()}})
	require.NoError(t, err)
	defer l.Close()
	var ae *lease.ArgError
	if _, err := l.Resume(ctx, "not a handle"); !errors.As(err, &ae) || ae.Arg != "handle" {
		t.Fatalf("Resume of a bad handle: %v; want an ArgError naming handle", err)
	}
}
