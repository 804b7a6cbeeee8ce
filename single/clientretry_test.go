package single_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestClientRetriesLostReply: a user's go-redis client with its default
// options (MaxRetries 3) sends a script again when its reply is lost. A
// claim run again by its own owner must return the grant it made, and a
// release run again after it succeeded is not an error.
func TestClientRetriesLostReply(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	n := d.GoRedis(t)
	const ttl = 10 * time.Second
	lk := newLocker(t, n, option.TTL(ttl))
	ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
	defer cancel()
	warm, err := lk.TryAcquire(ctx, "warm") // load the scripts: a NOSCRIPT answer is a reply too
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	d.Drop(0, 1)
	l, err := lk.TryAcquire(ctx, "try")
	if err != nil {
		t.Fatalf("TryAcquire on a free key, its claim's reply lost once: %v; want the lock", err)
	}
	if d.Dropped() != 1 {
		t.Fatalf("%d replies dropped; want 1", d.Dropped())
	}
	if got := field(t, srv, "try", "owner"); got != l.Owner() {
		t.Fatalf("owner = %q; want the lease's %q", got, l.Owner())
	}
	d.Drop(0, 1)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release, its reply lost once: %v; want nil", err)
	}
	if got := field(t, srv, "try", "owner"); got != "" {
		t.Fatalf("owner = %q after the release; want none", got)
	}

	d.Drop(0, 1)
	start := time.Now()
	l, err = lk.Acquire(ctx, "acquire")
	if err != nil {
		t.Fatalf("Acquire on a free key, its claim's reply lost once: %v", err)
	}
	if waited := time.Since(start); waited > ttl/2 {
		t.Errorf("Acquire on a free key took %v; it waited out its own claim's TTL (%v)", waited, ttl)
	}
	if got := field(t, srv, "acquire", "owner"); got != l.Owner() {
		t.Fatalf("owner = %q; want the lease's %q", got, l.Owner())
	}
	require.NoError(t, l.Release(ctx))
	if d.Dropped() != 3 {
		t.Fatalf("%d replies dropped; want 3", d.Dropped())
	}
}

// TestForceRetriedOnce: a break whose reply is lost is sent again by a
// go-redis client with its default options. It breaks once: the run
// again reports the holder the first run broke, and leaves the lock with
// the waiter the first run handed it to, instead of breaking that waiter
// too.
func TestForceRetriedOnce(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	n := d.GoRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	operator := newLocker(t, n)
	_, err := operator.ForceRelease(ctx, "warm") // load the script: a NOSCRIPT answer is a reply too
	require.NoError(t, err)

	lk := newLocker(t, redistest.NodeFor(t, redistest.Clients[0], srv.Addr()), option.TTL(time.Minute))
	holder, err := lk.TryAcquire(ctx, "brk")
	require.NoError(t, err)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := lk.Acquire(ctx, "brk", option.Retry(time.Minute, time.Minute))
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		got <- l
	}()
	waitQueued(t, srv, "brk", 1)

	d.Drop(0, 1)
	b, err := operator.ForceRelease(ctx, "brk")
	require.NoError(t, err, "ForceRelease, its reply lost once")
	require.Equal(t, 1, d.Dropped(), "replies dropped")
	w := handed(ctx, t, got)
	defer w.Release(ctx)
	if !b.Held || b.Owner != holder.Owner() || b.Was != holder.Token() {
		t.Errorf("Broken = %+v; want the holder %s, token %d, broken once", b, holder.Owner(), holder.Token())
	}
	info, err := lk.Inspect(ctx, "brk")
	require.NoError(t, err)
	if !info.Held || info.Owner != w.Owner() || w.Token() != b.Token+1 {
		t.Errorf("after the break: %+v, the waiter's token %d; want the waiter holding, token %d", info, w.Token(), b.Token+1)
	}
}
