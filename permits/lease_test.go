package permits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// TestDeadHolderFreed: a holder that stops renewing loses its permit at
// its TTL by the server's clock, and a waiter gets it then; a holder that
// renews keeps its permit past many TTLs.
func TestDeadHolderFreed(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		const name, ttl = "crash", 500 * time.Millisecond
		dead, err := s.TryAcquire(ctx, name, 2, option.TTL(ttl))
		require.NoError(t, err)
		alive, err := s.TryAcquire(ctx, name, 2, option.TTL(ttl), option.AutoRenew(true))
		require.NoError(t, err)
		l, err := s.Acquire(ctx, name, 2, option.Retry(time.Second, time.Second))
		require.NoError(t, err, "Acquire while a holder is dead")
		if permits.Slot(l) != permits.Slot(dead) || l.Token() <= alive.Token() {
			t.Fatalf("slot %d token %d; want the dead holder's slot %d, a token above %d", permits.Slot(l), l.Token(), permits.Slot(dead), alive.Token())
		}
		<-dead.Done()
		if !errors.Is(dead.Err(), lease.ErrExpired) {
			t.Fatalf("dead holder's lease ended with %v; want ErrExpired", dead.Err())
		}
		time.Sleep(5 * ttl)
		if alive.Err() != nil {
			t.Fatalf("renewed permit ended: %v", alive.Err())
		}
		if _, err := s.TryAcquire(ctx, name, 2); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire with both permits live: %v; want ErrTaken", err)
		}
		require.NoError(t, alive.Release(ctx))
		require.NoError(t, l.Release(ctx))
		if err := dead.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("release of the expired permit: %v; want ErrNotHeld", err)
		}
	})
}

// TestStaleFenced: a holder paused past its TTL, whose slot was granted
// again, is refused by the fence on that slot's resource; the other
// slot's holder writes on; its extension and release are refused.
func TestStaleFenced(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		s := newSemaphore(t, n)
		ctx := t.Context()
		const name = "shards"
		paused, err := s.TryAcquire(ctx, name, 2, option.TTL(50*time.Millisecond))
		require.NoError(t, err)
		other, err := s.TryAcquire(ctx, name, 2)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond) // a GC pause, a stalled VM...
		next, err := s.Acquire(ctx, name, 2)
		require.NoError(t, err)
		if next.Key() != paused.Key() || next.Token() <= paused.Token() {
			t.Fatalf("re-granted %q token %d; want %q with a token above %d", next.Key(), next.Token(), paused.Key(), paused.Token())
		}
		store := fence.NewStore(n)
		var guard fence.Guard
		require.NoError(t, store.Put(ctx, next.Key(), "next", next.Token()))
		require.NoError(t, guard.Admit(next.Key(), next.Token()))
		if err := store.Put(ctx, paused.Key(), "late", paused.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("late write to the re-granted slot: %v; want ErrStale", err)
		}
		if err := guard.Admit(paused.Key(), paused.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Guard on the re-granted slot: %v; want ErrStale", err)
		}
		require.NoError(t, store.Put(ctx, other.Key(), "other", other.Token()), "the other slot's holder")
		if v, tok, _, _ := store.Get(ctx, next.Key()); v != "next" || tok != next.Token() {
			t.Fatalf("slot 0 holds %q under %d; want the new holder's", v, tok)
		}
		if err := paused.Extend(ctx, time.Minute); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("stale extend: %v; want ErrNotHeld", err)
		}
		// Release asks the server, which tells that the slot was granted
		// again since.
		if err := paused.Release(ctx); !errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, fence.ErrStale) {
			t.Errorf("stale release: %v; want ErrNotHeld and ErrStale", err)
		}
		require.NoError(t, next.Release(ctx))
		require.NoError(t, other.Release(ctx))
	})
}

// TestClientRetriesLostReply: a go-redis client with its default options
// (MaxRetries 3) sends a script again when its reply is lost. A claim run
// again by its own owner returns its own grant, once; a release run again
// after it succeeded is not an error.
func TestClientRetriesLostReply(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	n := d.GoRedis(t)
	const ttl = 10 * time.Second
	s := newSemaphore(t, n, option.TTL(ttl))
	ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
	defer cancel()
	warm, err := s.TryAcquire(ctx, "warm", 1) // load the scripts: a NOSCRIPT answer is a reply too
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	d.Drop(0, 1)
	l, err := s.TryAcquire(ctx, "try", 2)
	if err != nil {
		t.Fatalf("TryAcquire, its claim's reply lost once: %v; want a permit", err)
	}
	if d.Dropped() != 1 {
		t.Fatalf("%d replies dropped; want 1", d.Dropped())
	}
	if got := holders(t, srv, "try"); got != "1" {
		t.Fatalf("%s holders after a claim run twice; want 1", got)
	}
	d.Drop(0, 1)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release, its reply lost once: %v; want nil", err)
	}
	if got := holders(t, srv, "try"); got != "0" {
		t.Fatalf("%s holders after the release; want 0", got)
	}

	d.Drop(0, 1)
	start := time.Now()
	l, err = s.Acquire(ctx, "acquire", 1)
	if err != nil {
		t.Fatalf("Acquire, its claim's reply lost once: %v", err)
	}
	if waited := time.Since(start); waited > ttl/2 {
		t.Errorf("Acquire of a free permit took %v; it waited out its own claim's TTL (%v)", waited, ttl)
	}
	if got := holders(t, srv, "acquire"); got != "1" {
		t.Fatalf("%s holders; want 1", got)
	}
	require.NoError(t, l.Release(ctx))
	if d.Dropped() != 3 {
		t.Fatalf("%d replies dropped; want 3", d.Dropped())
	}
}
