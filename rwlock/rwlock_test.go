package rwlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }

// A Locker's writers are a dlock.Locker's leases.
var _ dlock.Locker = (*rwlock.Locker)(nil)

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

func newLocker(t testing.TB, n node.Node, opts ...option.Option) *rwlock.Locker {
	t.Helper()
	lk, err := rwlock.New(n, opts...)
	require.NoError(t, err, "New")
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// serverMs reads the server's clock, in ms.
func serverMs(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	out, err := srv.Do("TIME")
	require.NoError(t, err, "TIME")
	f := strings.Split(out, "\n")
	sec, _ := strconv.ParseInt(f[0], 10, 64)
	usec, _ := strconv.ParseInt(f[1], 10, 64)
	return sec*1000 + usec/1000
}

func do(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	v, err := srv.Do(args...)
	if err != nil && v != "" {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func TestArgs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	wantArg := func(what string, err error, arg string) {
		t.Helper()
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != arg || !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: %v; want an *lease.ArgError naming %q", what, err, arg)
		}
	}
	_, err := rwlock.New(nil)
	wantArg("New(nil)", err, "node")
	_, err = rwlock.New(n, option.TTL(-time.Second))
	wantArg("option.TTL(-1s)", err, "TTL")
	_, err = rwlock.New(n, option.TTL(3*time.Millisecond))
	wantArg("option.TTL(3ms)", err, "TTL")
	_, err = rwlock.New(n, option.DriftFactor(0.5))
	wantArg("option.DriftFactor(0.5)", err, "DriftFactor")
	_, err = rwlock.New(n, option.Retry(2, 1))
	wantArg("option.Retry(inverted)", err, "Retry")

	lk := newLocker(t, n)
	ctx := t.Context()
	for name, f := range map[string]func(context.Context, string, ...option.Option) (*lease.Lease, error){
		"Acquire": lk.Acquire, "TryAcquire": lk.TryAcquire,
		"AcquireShared": lk.AcquireShared, "TryAcquireShared": lk.TryAcquireShared,
	} {
		_, err := f(ctx, "")
		wantArg(name+" empty key", err, "key")
		_, err = f(ctx, "k", option.TTL(-time.Second))
		wantArg(name+" negative TTL", err, "TTL")
		var nilCtx context.Context
		_, err = f(nilCtx, "k")
		wantArg(name+" nil ctx", err, "ctx")
	}
	_, err = lk.Inspect(ctx, "")
	wantArg("Inspect empty key", err, "key")
	if keys, err := srv.Keys(); err != nil || len(keys) != 0 {
		t.Fatalf("keys after bad arguments: %v, %v; want none", keys, err)
	}
}

// TestShareAndExclude: readers hold together with one token; a writer is
// refused while any reader holds, and excludes readers and writers while
// it holds.
func TestShareAndExclude(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		const key = "doc"
		var rs []*lease.Lease
		for i := range 5 {
			l, err := lk.TryAcquireShared(ctx, key)
			require.NoError(t, err, "reader %d", i)
			if l.Token() == 0 || i > 0 && l.Token() != rs[0].Token() {
				t.Fatalf("reader %d token %d; want the first reader's %d, not 0", i, l.Token(), l.Token())
			}
			rs = append(rs, l)
		}
		if got := do(t, srv, "ZCARD", rwlock.KeyOf(key)+":r"); got != "5" {
			t.Fatalf("%s readers on the server; want 5", got)
		}
		info, err := lk.Inspect(ctx, key)
		require.NoError(t, err)
		if !info.Held || info.Token != rs[0].Token() || info.TTL <= 0 {
			t.Errorf("Inspect with readers: %+v; want held, the readers' token", info)
		}
		if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire with readers: %v; want ErrTaken", err)
		}
		for _, l := range rs {
			require.NoError(t, l.Release(ctx))
		}
		w, err := lk.TryAcquire(ctx, key)
		require.NoError(t, err, "TryAcquire once the readers left")
		if w.Token() <= rs[0].Token() {
			t.Fatalf("writer token %d; want above the readers' %d", w.Token(), rs[0].Token())
		}
		if _, err := lk.TryAcquireShared(ctx, key); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquireShared with a writer: %v; want ErrTaken", err)
		}
		if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire with a writer: %v; want ErrTaken", err)
		}
		info, err = lk.Inspect(ctx, key)
		require.NoError(t, err)
		if !info.Held || info.Owner != w.Owner() || info.Token != w.Token() {
			t.Errorf("Inspect with a writer: %+v; want it held by %s", info, w.Owner())
		}
		require.NoError(t, w.Extend(ctx, time.Minute))
		require.NoError(t, w.Release(ctx))
		if err := w.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("second Release: %v; want ErrNotHeld", err)
		}
		r, err := lk.TryAcquireShared(ctx, key)
		require.NoError(t, err, "TryAcquireShared once the writer left")
		if r.Token() <= w.Token() {
			t.Fatalf("reader token %d; want above the last writer's %d", r.Token(), w.Token())
		}
		require.NoError(t, r.Extend(ctx, time.Minute), "a reader extends")
		require.NoError(t, r.Release(ctx))
		info, err = lk.Inspect(ctx, key)
		require.NoError(t, err)
		if info.Held || info.Token != r.Token() {
			t.Errorf("Inspect when free: %+v; want not held, the counter %d", info, r.Token())
		}
	})
}

// TestLeases: readers' and writers' leases expire, renew, and are refused
// once ended, as the single strategy's are.
func TestLeases(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		for _, shared := range []bool{false, true} {
			try := lk.TryAcquire
			if shared {
				try = lk.TryAcquireShared
			}
			key := "lease-" + strconv.FormatBool(shared)
			// Renewed well past its TTL.
			l, err := try(ctx, key, option.TTL(300*time.Millisecond), option.AutoRenew(true))
			require.NoError(t, err)
			time.Sleep(700 * time.Millisecond)
			if l.TTL() <= 0 {
				t.Fatalf("shared=%v: an auto-renewed lease ended: %v", shared, l.Err())
			}
			require.NoError(t, l.Release(ctx))
			<-l.Done()
			if !errors.Is(l.Err(), lease.ErrReleased) {
				t.Errorf("shared=%v: lease ended with %v; want ErrReleased", shared, l.Err())
			}
			// Left to run out: never revived.
			l, err = try(ctx, key, option.TTL(100*time.Millisecond))
			require.NoError(t, err)
			<-l.Done()
			time.Sleep(20 * time.Millisecond) // past the server's end too (the local one comes first)
			if err := l.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrExpired) {
				t.Errorf("shared=%v: Extend after expiry: %v; want ErrNotHeld or ErrExpired", shared, err)
			}
			// A writer since: a reader's or writer's late extend is stale.
			l, err = try(ctx, key, option.TTL(100*time.Millisecond))
			require.NoError(t, err)
			time.Sleep(110 * time.Millisecond)
			w, err := lk.TryAcquire(ctx, key)
			require.NoError(t, err)
			if err := l.Extend(ctx, time.Minute); err == nil {
				t.Errorf("shared=%v: Extend after a newer writer: nil; want refused", shared)
			}
			require.NoError(t, w.Release(ctx))
		}
	})
}
