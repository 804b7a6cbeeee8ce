package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// TestLeaseWithTTL: option.TTL(0) keeps the Locker's default TTL (here
// 5s, not the package default of 30s), by the lease's own clock and by the
// servers'; a negative TTL is refused with an ArgError naming ttl.
func TestLeaseWithTTL(t *testing.T) {
	ctx := t.Context()
	const def = 5 * time.Second
	srvs := redistest.StartN(t, 3)
	type inspect func(ctx context.Context, key string) (time.Duration, error) // the holder's time left on the servers
	for _, st := range []struct {
		name string
		open func(t *testing.T) (dlock.Locker, inspect)
	}{
		{"single", func(t *testing.T) (dlock.Locker, inspect) {
			lk, err := single.New(redistest.NodeFor(t, "go-redis", srvs[0].Addr()), option.TTL(def))
			require.NoError(t, err)
			return lk, func(ctx context.Context, key string) (time.Duration, error) {
				info, err := lk.Inspect(ctx, key)
				return info.TTL, err
			}
		}},
		{"quorum", func(t *testing.T) (dlock.Locker, inspect) {
			ns := make([]node.Node, len(srvs))
			for i, s := range srvs {
				ns[i] = redistest.NodeFor(t, "go-redis", s.Addr())
			}
			lk, err := quorum.New(ns, option.TTL(def), option.DurableNodes(true))
			require.NoError(t, err)
			return lk, func(ctx context.Context, key string) (time.Duration, error) {
				info, err := lk.Inspect(ctx, key)
				return info.TTL, err
			}
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			lk, inspect := st.open(t)
			defer lk.Close()
			for _, acquire := range []struct {
				name string
				f    func(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
			}{{"Acquire", lk.Acquire}, {"TryAcquire", lk.TryAcquire}} {
				key := "ttl-zero-" + acquire.name
				l, err := acquire.f(ctx, key, option.TTL(0))
				if err != nil {
					t.Fatalf("%s with option.TTL(0): %v; want the Locker's default TTL", acquire.name, err)
				}
				left, err := inspect(ctx, key)
				require.NoError(t, err)
				if got := l.TTL(); got <= def-time.Second || got > def || left <= def-time.Second || left > def {
					t.Errorf("%s with option.TTL(0): lease TTL %v, servers' %v; want both about %v", acquire.name, got, left, def)
				}
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}

				var ae *lease.ArgError
				if _, err := acquire.f(ctx, key, option.TTL(-time.Second)); !errors.As(err, &ae) || ae.Arg != "TTL" {
					t.Errorf("%s with option.TTL(-1s) = %v; want an ArgError naming ttl", acquire.name, err)
				}
			}
		})
	}
}
