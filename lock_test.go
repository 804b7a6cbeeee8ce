package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func TestMain(m *testing.M) {
	// Three servers, for the quorum's migration example; they fsync every
	// write, as its DurableNodes declares. The other examples lock on the
	// first.
	goleak.VerifyTestMain(examplemain.With(m, 3, "--appendonly", "yes", "--appendfsync", "always"),
		redistest.ClientGoroutines()...)
}

// forEachClient runs f once per client library with a single-strategy Locker
// on a fresh server.
func forEachClient(t *testing.T, f func(t *testing.T, srv *redistest.Server, lk dlock.Locker)) {
	t.Helper()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			lk, err := single.New(redistest.NodeFor(t, client, srv.Addr()))
			require.NoError(t, err)
			f(t, srv, lk)
		})
	}
}

func TestDoRunsUnderLock(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		ctx := t.Context()
		var got fence.Token
		err := dlock.Do(ctx, lk, "job", func(ctx context.Context, token fence.Token) error {
			got = token
			if _, err := lk.TryAcquire(ctx, "job"); !errors.Is(err, dlock.ErrTaken) {
				t.Errorf("TryAcquire inside Do: %v; want ErrTaken", err)
			}
			return nil
		})
		if err != nil || got == 0 {
			t.Fatalf("Do = %v, token %d; want nil and a token", err, got)
		}
		l, err := lk.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatalf("TryAcquire after Do: %v; want the lock released", err)
		}
		if l.Token() <= got {
			t.Fatalf("token %d after Do's %d; want larger", l.Token(), got)
		}
		_ = l.Release(ctx)
	})
}

func TestDoPassesFnError(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		boom := errors.New("boom")
		err := dlock.Do(t.Context(), lk, "job", func(context.Context, fence.Token) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("Do = %v; want fn's error", err)
		}
		if v, _ := srv.LockField("dlock:{job}", "owner"); v != "" {
			t.Fatalf("owner = %q after Do; want released", v)
		}
	})
}

func TestDoLeaseLost(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		started := make(chan struct{})
		errc := make(chan error, 1)
		var cause error
		go func() {
			errc <- dlock.Do(t.Context(), lk, "job", func(ctx context.Context, _ fence.Token) error {
				close(started)
				<-ctx.Done()
				cause = context.Cause(ctx)
				return ctx.Err()
			}, option.TTL(90*time.Millisecond))
		}()
		<-started
		// Another owner takes the lock over on the server: the next renewal
		// is refused and fn's context ends.
		_, err := srv.Do(redistest.StealArgs("dlock:{job}", "intruder")...)
		require.NoError(t, err)
		select {
		case err = <-errc:
		case <-time.After(5 * time.Second):
			t.Fatal("fn's context was not cancelled after the lease was lost")
		}
		if !errors.Is(cause, dlock.ErrLost) {
			t.Fatalf("fn's context cause = %v; want ErrLost", cause)
		}
		if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v; want ErrLost and fn's context.Canceled", err)
		}
		if v, _ := srv.LockField("dlock:{job}", "owner"); v != "intruder" {
			t.Fatalf("owner = %q; want the intruder's lock untouched", v)
		}
	})
}

func TestDoBadInput(t *testing.T) {
	fn := func(context.Context, fence.Token) error { return nil }
	if err := dlock.Do(t.Context(), nil, "k", fn); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Do(nil locker) = %v; want ErrInvalid", err)
	}
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		if err := dlock.Do(t.Context(), lk, "k", nil); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Do(nil fn) = %v; want ErrInvalid", err)
		}
		if err := dlock.Do(t.Context(), lk, "", fn); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Do(empty key) = %v; want ErrInvalid", err)
		}
	})
}

func TestDoCancelledWhileWaiting(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		held, err := lk.TryAcquire(t.Context(), "job")
		require.NoError(t, err)
		defer held.Release(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		ran := false
		err = dlock.Do(ctx, lk, "job", func(context.Context, fence.Token) error { ran = true; return nil })
		if ran || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do = %v (fn ran: %v); want DeadlineExceeded without running fn", err, ran)
		}
	})
}

func TestDoLeavesCallerOptionsAlone(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, lk dlock.Locker) {
		opts := make([]option.Option, 1, 4)
		opts[0] = option.TTL(time.Second)
		err := dlock.Do(t.Context(), lk, "job", func(context.Context, fence.Token) error { return nil }, opts...)
		require.NoError(t, err)
		if opts[:2][1] != (option.Option{}) {
			t.Fatal("Do wrote into the spare capacity of the caller's options")
		}
	})
}
