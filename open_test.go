package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/redlock"
)

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestOpenRefused: a server that refuses the connection is reported as
// refused, not as a deadline the caller never set off, and at once: one
// dial per call, not go-redis's default five, 100ms apart.
func TestOpenRefused(t *testing.T) {
	addrs := []string{deadAddr(t), deadAddr(t), deadAddr(t)}
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			// The caller's context has a deadline, far off: it must not
			// be what the error reports.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			start := time.Now()
			lk, err := dlock.Open(ctx, dlock.Config{Addrs: addrs[:1], Client: client})
			took := time.Since(start)
			if err == nil {
				lk.Close()
				t.Fatalf("single: Open of a refused server succeeded")
			}
			if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("single: Open = %v; want connection refused, not a deadline", err)
			}
			if took > 300*time.Millisecond {
				t.Errorf("single: Open took %v; want one dial, a few ms", took)
			}

			lk, err = dlock.Open(ctx, dlock.Config{Strategy: dlock.StrategyQuorum, Addrs: addrs, Client: client, DurableNodes: true})
			require.NoError(t, err, "quorum: Open does not need its servers")
			defer lk.Close()
			start = time.Now()
			l, err := lk.TryAcquire(ctx, "refused")
			took = time.Since(start)
			if err == nil {
				_ = l.Release(ctx)
				t.Fatalf("quorum: TryAcquire on refused servers succeeded")
			}
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("quorum: TryAcquire = %v; want no deadline in it", err)
			}
			refused := 0
			for _, a := range qe.Nodes {
				switch a.Kind {
				case redlock.KindError:
					if !strings.Contains(a.Err.Error(), "connection refused") {
						t.Errorf("quorum: %s answered %v; want connection refused", a.Node, a.Err)
					}
					refused++
				case redlock.KindNotAwaited:
				default:
					t.Errorf("quorum: %s answered %v (%v); want connection refused", a.Node, a.Kind, a.Err)
				}
			}
			if refused == 0 {
				t.Errorf("quorum: no node reported its refusal: %v", err)
			}
			if took > 300*time.Millisecond {
				t.Errorf("quorum: TryAcquire took %v; want one dial per node, a few ms", took)
			}
		})
	}
}

// goRedisLog records what go-redis prints. go-redis has one logger per
// process, and redistest silences it for every test; these tests put a
// recorder in its place for their run (no test of this package runs in
// parallel) and the silence back after.
type goRedisLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *goRedisLog) Printf(_ context.Context, format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func recordGoRedisLog(t *testing.T) *goRedisLog {
	rec := &goRedisLog{}
	redis.SetLogger(rec)
	t.Cleanup(func() { redis.SetLogger(&goRedisLog{}) })
	return rec
}

// TestOpenClientsQuiet: the clients Open makes print nothing of their own
// when servers refuse connections, die, or drop a connection mid-reply:
// the errors reach the caller through the calls, and a program's stderr is
// its own.
func TestOpenClientsQuiet(t *testing.T) {
	rec := recordGoRedisLog(t)
	dead := deadAddr(t)
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, client := range redistest.Clients {
		// A server that is not there, for each strategy.
		for range 3 {
			if lk, err := dlock.Open(ctx, dlock.Config{Addrs: []string{dead}, Client: client}); err == nil {
				lk.Close()
				t.Fatalf("%s: Open of a dead server succeeded", client)
			}
		}
		lk, err := dlock.Open(ctx, dlock.Config{Strategy: dlock.StrategyQuorum, Addrs: []string{dead}, Client: client, DurableNodes: true})
		require.NoError(t, err)
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if _, err := lk.Acquire(wctx, "quiet"); err == nil {
			t.Fatalf("%s: Acquire on a dead quorum succeeded", client)
		}
		wcancel()
		require.NoError(t, lk.Close())

		// A connection closed with a reply lost.
		lk, err = dlock.Open(ctx, dlock.Config{Addrs: []string{d.Addr()}, Client: client})
		require.NoError(t, err)
		l, err := lk.TryAcquire(ctx, "quiet-"+client) // load the scripts
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		d.Drop(0, 1)
		if l, err := lk.TryAcquire(ctx, "quiet-"+client); err == nil {
			_ = l.Release(ctx)
			t.Fatalf("%s: TryAcquire with its reply lost: granted", client)
		}
		l, err = lk.Acquire(ctx, "quiet-"+client)
		require.NoError(t, err, "Acquire after the lost reply")
		require.NoError(t, l.Release(ctx))
		require.NoError(t, lk.Close())
	}

	// A server that dies under a Locker, and stays dead through a wait.
	for _, client := range redistest.Clients {
		victim := redistest.Start(t)
		lk, err := dlock.Open(ctx, dlock.Config{Addrs: []string{victim.Addr()}, Client: client})
		require.NoError(t, err)
		victim.Kill()
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if _, err := lk.Acquire(wctx, "quiet"); err == nil {
			t.Fatalf("%s: Acquire on a dead server succeeded", client)
		}
		wcancel()
		require.NoError(t, lk.Close())
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lines) > 0 {
		t.Errorf("go-redis printed %d lines, e.g. %q; want none", len(rec.lines), rec.lines[0])
	}
}
