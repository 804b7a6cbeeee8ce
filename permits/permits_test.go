package permits_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(examplemain.With(m, 1)) }

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

func newSemaphore(t testing.TB, n node.Node, opts ...option.Option) *permits.Semaphore {
	t.Helper()
	s, err := permits.New(n, opts...)
	require.NoError(t, err, "New")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holders returns how many holders the server lists for name, live or not
// yet pruned.
func holders(t *testing.T, srv *redistest.Server, name string) string {
	t.Helper()
	v, err := srv.Do("ZCARD", permits.HashKey(name)+":h")
	require.NoError(t, err)
	return v
}

func TestArgs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	s := newSemaphore(t, n)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		n    int
		opts []option.Option
		arg  string
	}{
		{"", 1, nil, "name"},
		{"x", 0, nil, "n"},
		{"x", -3, nil, "n"},
		{"x", permits.MaxPermits + 1, nil, "n"},
		{"x", 2, []option.Option{option.TTL(-time.Second)}, "TTL"},
		{"x", 2, []option.Option{option.TTL(time.Millisecond)}, "TTL"},
		{"x", 2, []option.Option{option.Retry(time.Second, time.Millisecond)}, "Retry"},
	} {
		for _, acq := range []func() (*lease.Lease, error){
			func() (*lease.Lease, error) { return s.TryAcquire(ctx, c.name, c.n, c.opts...) },
			func() (*lease.Lease, error) { return s.Acquire(ctx, c.name, c.n, c.opts...) },
		} {
			_, err := acq()
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("acquire(%q, %d): %v; want an *ArgError on %q", c.name, c.n, err, c.arg)
			}
		}
	}
	keys, err := srv.Keys()
	require.NoError(t, err)
	if len(keys) != 0 {
		t.Errorf("refused acquires left keys: %v", keys)
	}
	if _, err := s.TryAcquire(ctx, "x", permits.MaxPermits); err != nil {
		t.Errorf("TryAcquire with n = MaxPermits: %v", err)
	}
	var ae *lease.ArgError
	if _, err := permits.New(nil); !errors.As(err, &ae) || ae.Arg != "node" {
		t.Errorf("New(nil): %v; want an *ArgError on node", err)
	}
	for _, o := range []option.Option{option.TTL(-1), option.DriftFactor(0.6), option.Retry(-1, 0)} {
		if _, err := permits.New(n, o); !errors.As(err, &ae) {
			t.Errorf("New with a bad option: %v; want an *ArgError", err)
		}
	}
}

// TestTryAcquireN: n permits of a name go to n holders, each in a slot of
// its own below n with a larger token; the next is refused until one is
// released, and then gets the slot freed.
func TestTryAcquireN(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx := t.Context()
		const name, max = "pool", 3
		var ls []*lease.Lease
		var last fence.Token
		for i := range max {
			l, err := s.TryAcquire(ctx, name, max)
			require.NoError(t, err, "TryAcquire %d of %d", i+1, max)
			if got := permits.Slot(l); got != i {
				t.Errorf("permit %d in slot %d; want %d", i, got, i)
			}
			if l.Key() != name+"#"+string(rune('0'+i)) {
				t.Errorf("Key %q", l.Key())
			}
			if l.Token() <= last {
				t.Errorf("token %d after %d; want larger", l.Token(), last)
			}
			last = l.Token()
			ls = append(ls, l)
		}
		if _, err := s.TryAcquire(ctx, name, max); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire with all %d held: %v; want ErrTaken", max, err)
		}
		if got := holders(t, srv, name); got != "3" {
			t.Fatalf("%s holders on the server; want 3", got)
		}
		require.NoError(t, ls[1].Release(ctx))
		l, err := s.TryAcquire(ctx, name, max)
		require.NoError(t, err, "TryAcquire after a release")
		if permits.Slot(l) != 1 || l.Token() <= last {
			t.Errorf("after slot 1's release: slot %d token %d; want slot 1, token above %d", permits.Slot(l), l.Token(), last)
		}
		ls[1] = l
		for _, l := range ls {
			require.NoError(t, l.Release(ctx))
		}
		if got := holders(t, srv, name); got != "0" {
			t.Fatalf("%s holders after every release; want 0", got)
		}
	})
}

// TestNameShapes: names with braces or a '#' of their own keep every key
// under one hash tag, and Slot reads the slot from the end of the Key.
func TestNameShapes(t *testing.T) {
	srv := redistest.Start(t)
	s := newSemaphore(t, redistest.NodeFor(t, "valkey-go", srv.Addr()))
	ctx := t.Context()
	for name, key := range map[string]string{
		"}a":    "dlock:permits:%{%7Da}",
		"a{b}c": "dlock:permits:{a{b}c}",
		"job#7": "dlock:permits:{job#7}",
	} {
		if got := permits.HashKey(name); got != key {
			t.Errorf("HashKey(%q) = %q; want %q", name, got, key)
		}
		l, err := s.TryAcquire(ctx, name, 2)
		require.NoError(t, err, "TryAcquire(%q)", name)
		if l.Key() != name+"#0" || permits.Slot(l) != 0 {
			t.Errorf("Key %q, Slot %d; want %q, 0", l.Key(), permits.Slot(l), name+"#0")
		}
		if got := holders(t, srv, name); got != "1" {
			t.Errorf("%q: %s holders under %s; want 1", name, got, key)
		}
		require.NoError(t, l.Release(ctx))
	}
}
