package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// TestNilContext calls every public entry point that takes a context with
// a nil one: each must return an *lease.ArgError naming ctx, not panic,
// and change nothing (the lease stays held through a refused Extend or
// Release).
func TestNilContext(t *testing.T) {
	var nilCtx context.Context // what the test is about; a literal nil would draw a lint
	ctx := t.Context()
	srvs := redistest.StartN(t, 3)
	addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	nodes := func(t *testing.T, addrs []string) []node.Node {
		ns := make([]node.Node, len(addrs))
		for i, a := range addrs {
			ns[i] = redistest.NodeFor(t, "go-redis", a)
		}
		return ns
	}
	// inspect is a strategy's Inspect, without its Info.
	type inspect func(ctx context.Context, key string) error
	for _, st := range []struct {
		name string
		url  string
		open func(t *testing.T) (dlock.Locker, inspect)
	}{
		{"single", "redis://" + addrs[0], func(t *testing.T) (dlock.Locker, inspect) {
			lk, err := single.New(nodes(t, addrs[:1])[0])
			require.NoError(t, err)
			return lk, func(ctx context.Context, key string) error { _, err := lk.Inspect(ctx, key); return err }
		}},
		{"quorum", "quorum://" + addrs[0] + "," + addrs[1] + "," + addrs[2] + "?durable=true", func(t *testing.T) (dlock.Locker, inspect) {
			lk, err := quorum.New(nodes(t, addrs), option.DurableNodes(true))
			require.NoError(t, err)
			return lk, func(ctx context.Context, key string) error { _, err := lk.Inspect(ctx, key); return err }
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			lk, inspect := st.open(t)
			defer lk.Close()
			key, free := "nil-ctx-held", "nil-ctx-free"
			held, err := lk.TryAcquire(ctx, key)
			require.NoError(t, err)
			store := fence.NewStore(nodes(t, addrs[:1])[0])
			cfg, err := connect.ParseURL(st.url)
			require.NoError(t, err)
			for _, tc := range []struct {
				name string
				call func() error
			}{
				{"dlock.Do", func() error {
					return dlock.Do(nilCtx, lk, free, func(context.Context, fence.Token) error { return nil })
				}},
				{"Acquire", func() error { _, err := lk.Acquire(nilCtx, free); return err }},
				{"TryAcquire", func() error { _, err := lk.TryAcquire(nilCtx, free); return err }},
				{"Lease.Extend", func() error { return held.Extend(nilCtx, time.Minute) }},
				{"Lease.Release", func() error { return held.Release(nilCtx) }},
				{"Inspect", func() error { return inspect(nilCtx, key) }},
				{"dlock.Open", func() error {
					l, err := dlock.Open(nilCtx, cfg)
					if err == nil {
						l.Close()
					}
					return err
				}},
				{"dlock.OpenURL", func() error {
					l, err := dlock.OpenURL(nilCtx, st.url)
					if err == nil {
						l.Close()
					}
					return err
				}},
				{"fence.Store.Put", func() error { return store.Put(nilCtx, "nil-ctx-res", "v", held.Token()) }},
				{"fence.Store.Get", func() error { _, _, _, err := store.Get(nilCtx, "nil-ctx-res"); return err }},
			} {
				err := recovered(tc.call)
				var ae *lease.ArgError
				if !errors.As(err, &ae) || ae.Arg != "ctx" || ae.Rule != "must not be nil" || !errors.Is(err, dlock.ErrInvalid) {
					t.Errorf("%s(nil ctx) = %v; want *lease.ArgError{Arg: \"ctx\", Rule: \"must not be nil\"}", tc.name, err)
				}
			}
			if err := held.Err(); err != nil {
				t.Errorf("lease after the nil-ctx calls: ended with %v; want still held", err)
			}
			if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, dlock.ErrTaken) {
				t.Errorf("TryAcquire of the held key after the nil-ctx calls = %v; want ErrTaken", err)
			}
			if err := held.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
}

// recovered runs f and returns its error, or its panic as an error.
func recovered(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f()
}
