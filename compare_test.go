package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// parityTTL is long enough for a loaded machine under the race detector,
// short enough that the expiry case stays quick.
const parityTTL = 2 * time.Second

// forEachStrategy runs f through the Locker interface for both strategies and
// both client libraries: single on one server, quorum on five with the
// lost-data guard on (so fresh nodes first sit out one TTL, as in
// production).
func forEachStrategy(t *testing.T, f func(t *testing.T, lk dlock.Locker)) {
	t.Helper()
	srv := redistest.Start(t)
	nodes5 := redistest.StartN(t, 5)
	for _, client := range redistest.Clients {
		t.Run("single/"+client, func(t *testing.T) {
			lk, err := single.New(redistest.NodeFor(t, client, srv.Addr()), option.TTL(parityTTL))
			require.NoError(t, err)
			f(t, lk)
		})
		t.Run("quorum/"+client, func(t *testing.T) {
			nodes := make([]node.Node, len(nodes5))
			for i, s := range nodes5 {
				nodes[i] = redistest.NodeFor(t, client, s.Addr())
			}
			lk, err := quorum.New(nodes, option.TTL(parityTTL))
			require.NoError(t, err)
			t.Cleanup(func() { _ = lk.Close() })
			f(t, lk)
		})
	}
}

// acquire waits for key; a quorum on fresh nodes first sits out one TTL.
func acquire(t *testing.T, lk dlock.Locker, key string, opts ...option.Option) *lease.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*parityTTL)
	defer cancel()
	l, err := lk.Acquire(ctx, key, opts...)
	require.NoError(t, err, "Acquire(%q)", key)
	return l
}

func TestParityAcquireExtendRelease(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		ctx := t.Context()
		l := acquire(t, lk, "parity")
		if !l.Fenced() || l.Token() == 0 {
			t.Fatalf("token %d, fenced %v; want a token", l.Token(), l.Fenced())
		}
		if got := l.TTL(); got <= 0 || got > parityTTL {
			t.Fatalf("TTL() = %v; want in (0, %v]", got, parityTTL)
		}
		if _, err := lk.TryAcquire(ctx, "parity"); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("second TryAcquire: %v; want ErrTaken", err)
		}
		time.Sleep(parityTTL / 4)
		before := l.TTL()
		if err := l.Extend(ctx, parityTTL); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if after := l.TTL(); after <= before {
			t.Fatalf("TTL %v after Extend, %v before; want it restarted", after, before)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if !errors.Is(l.Err(), dlock.ErrReleased) {
			t.Fatalf("Err() after Release = %v; want ErrReleased", l.Err())
		}
		if err := l.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("second Release: %v; want ErrNotHeld", err)
		}
		if err := l.Extend(ctx, parityTTL); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Extend after Release: %v; want ErrNotHeld", err)
		}
		next, err := lk.TryAcquire(ctx, "parity")
		if err != nil {
			t.Fatalf("TryAcquire after Release: %v", err)
		}
		if next.Token() <= l.Token() {
			t.Fatalf("token %d after %d; want larger", next.Token(), l.Token())
		}
		_ = next.Release(ctx)
	})
}

func TestParityExpiry(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		ctx := t.Context()
		ttl := 500 * time.Millisecond
		l := acquire(t, lk, "expiry", option.TTL(ttl))
		select {
		case <-l.Done():
		case <-time.After(5 * ttl):
			t.Fatal("Done not closed after the TTL")
		}
		if !errors.Is(l.Err(), dlock.ErrExpired) {
			t.Fatalf("Err() = %v; want ErrExpired", l.Err())
		}
		if err := l.Extend(ctx, ttl); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Extend after expiry: %v; want ErrNotHeld", err)
		}
		// Local validity ends before the servers' TTL (drift); the next
		// holder waits for the servers.
		next := acquire(t, lk, "expiry")
		if next.Token() <= l.Token() {
			t.Fatalf("token %d after %d; want larger", next.Token(), l.Token())
		}
		_ = next.Release(ctx)
	})
}

func TestParityContention(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		acquire(t, lk, "warm-up").Release(t.Context())
		const workers, rounds = 6, 5
		var (
			mu      sync.Mutex
			holders int
			tokens  []fence.Token
			wg      sync.WaitGroup
		)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					l, err := lk.Acquire(ctx, "contended")
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					mu.Lock()
					holders++
					if holders > 1 {
						t.Errorf("%d holders at once", holders)
					}
					tokens = append(tokens, l.Token())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					holders--
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		if len(tokens) != workers*rounds {
			t.Fatalf("%d acquisitions; want %d", len(tokens), workers*rounds)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("token %d granted after %d; want strictly increasing", tokens[i], tokens[i-1])
			}
		}
	})
}

func TestParityCancelledAcquire(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		held := acquire(t, lk, "busy")
		// Long enough for a first attempt to come back refused under the
		// race detector on a loaded machine: an attempt the deadline cuts
		// short learns nothing of the lock, and the error says only that.
		ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
		defer cancel()
		if _, err := lk.Acquire(ctx, "busy"); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("Acquire of a held lock until the deadline: %v; want DeadlineExceeded and ErrTaken", err)
		}
		require.NoError(t, held.Release(t.Context()), "Release")
		// The cancelled waiter left nothing behind: the lock is free.
		l, err := lk.TryAcquire(t.Context(), "busy")
		if err != nil {
			t.Fatalf("TryAcquire after the waiter gave up: %v", err)
		}
		_ = l.Release(t.Context())
	})
}

func TestParityBadInput(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		ctx := t.Context()
		for _, c := range []struct {
			name string
			key  string
			opts []option.Option
		}{
			{"empty key", "", nil},
			{"negative ttl", "k", []option.Option{option.TTL(-time.Second)}},
			{"ttl inside the drift margin", "k", []option.Option{option.TTL(3 * time.Millisecond)}},
			{"bad retry", "k", []option.Option{option.Retry(time.Second, time.Millisecond)}},
		} {
			_, err := lk.TryAcquire(ctx, c.key, c.opts...)
			var ae *lease.ArgError
			if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &ae) {
				t.Errorf("%s: TryAcquire = %v; want an *lease.ArgError", c.name, err)
			}
		}
	})
}
