package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/rwlock"
)

// lossyLocker returns a Locker on a go-redis client behind a Dropper,
// with the client's MaxRetries as given (0: go-redis's default, 3), its
// scripts loaded (a NOSCRIPT answer is a reply too). Its TTL is 10 s
// unless opts set another.
func lossyLocker(t *testing.T, srv *redistest.Server, retries int, opts ...option.Option) (*rwlock.Locker, *redistest.Dropper) {
	t.Helper()
	d := redistest.StartDropper(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: d.Addr(), MaxRetries: retries})
	n := goredis.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		_ = c.Close()
	})
	lk := newLocker(t, n, append([]option.Option{option.TTL(10 * time.Second)}, opts...)...)
	ctx := t.Context()
	for _, try := range []func(context.Context, string, ...option.Option) (*lease.Lease, error){lk.TryAcquire, lk.TryAcquireShared} {
		l, err := try(ctx, "warm")
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, time.Second))
		require.NoError(t, l.Release(ctx))
	}
	return lk, d
}

// TestClientRetriesLostReply: a user's go-redis client with its default
// options (MaxRetries 3) sends a script again when its reply is lost. A
// claim run again by its own owner returns the grant it made, and a
// release run again after it succeeded is not an error, for writers and
// readers, trying and blocking.
func TestClientRetriesLostReply(t *testing.T) {
	srv := redistest.Start(t)
	lk, d := lossyLocker(t, srv, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	h := rwlock.KeyOf("k")
	for i, tc := range []struct {
		name   string
		shared bool
		f      func(context.Context, string, ...option.Option) (*lease.Lease, error)
	}{
		{"TryAcquire", false, lk.TryAcquire},
		{"TryAcquireShared", true, lk.TryAcquireShared},
		{"Acquire", false, lk.Acquire},
		{"AcquireShared", true, lk.AcquireShared},
	} {
		d.Drop(0, 1)
		l, err := tc.f(ctx, "k")
		if err != nil {
			t.Fatalf("%s on a free key, its claim's reply lost once: %v; want the lock", tc.name, err)
		}
		if got := d.Dropped(); got != 2*i+1 {
			t.Fatalf("%s: %d replies dropped; want %d", tc.name, got, 2*i+1)
		}
		if tc.shared {
			if got := do(t, srv, "ZCARD", h+":r"); got != "1" {
				t.Fatalf("%s: %s readers on the server; want 1, its own", tc.name, got)
			}
		} else if got := do(t, srv, "HGET", h, "owner"); got != l.Owner() {
			t.Fatalf("%s: owner = %q; want the lease's %q", tc.name, got, l.Owner())
		}
		d.Drop(0, 1)
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: Release, its reply lost once: %v; want nil", tc.name, err)
		}
		if got := do(t, srv, "HGET", h, "owner"); got != "" {
			t.Fatalf("%s: owner = %q after the release; want none", tc.name, got)
		}
		if got := do(t, srv, "EXISTS", h+":r", h+":q", h+":gone"); got != "0" {
			t.Fatalf("%s: %s reader, queue or gone keys left after the release; want none", tc.name, got)
		}
	}
}

// TestLostReplyAbandoned: without client retries, a claim whose reply is
// lost is given up (abandoned): no lease, reader or ticket of it is left,
// and its owner is recorded as gone, so that a late copy is refused.
func TestLostReplyAbandoned(t *testing.T) {
	srv := redistest.Start(t)
	lk, d := lossyLocker(t, srv, -1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	h := rwlock.KeyOf("k")
	for _, f := range []func(context.Context, string, ...option.Option) (*lease.Lease, error){lk.TryAcquire, lk.TryAcquireShared} {
		d.Drop(0, 1)
		if l, err := f(ctx, "k"); err == nil || errors.Is(err, lease.ErrTaken) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("a try whose reply was lost: %v; want the exchange's error", err)
		}
		if got := do(t, srv, "HGET", h, "owner"); got != "" {
			t.Fatalf("owner = %q after the abandon; want none", got)
		}
		if got := do(t, srv, "ZCARD", h+":r"); got != "0" {
			t.Fatalf("%s readers after the abandon; want none", got)
		}
	}
	if got := do(t, srv, "ZCARD", h+":gone"); got != "2" {
		t.Fatalf("%s gone records; want 2", got)
	}
	// A blocking acquire whose claim's reply is lost abandons it and tries
	// again under a new owner.
	d.Drop(0, 1)
	l, err := lk.Acquire(ctx, "k")
	require.NoError(t, err, "Acquire, its first claim's reply lost")
	if got := do(t, srv, "ZCARD", h+":gone"); got != "3" {
		t.Fatalf("%s gone records; want 3", got)
	}
	require.NoError(t, l.Release(ctx))
	r, err := lk.TryAcquireShared(ctx, "k")
	require.NoError(t, err, "the lock is free after all that")
	require.NoError(t, r.Release(ctx))
}
