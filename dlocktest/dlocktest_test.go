package dlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// wait bounds a wait that must end; a server that never expired a key
// would run into it.
const wait = 30 * time.Second

// TestLeaseExpires: a lease nobody renews or releases ends after its TTL,
// and the server lets go of the key by its own clock, so the next caller
// is granted it.
func TestLeaseExpires(t *testing.T) {
	for _, n := range []int{0, 3} {
		t.Run(fmt.Sprintf("quorum=%d", n), func(t *testing.T) {
			forEach(t, n, func(t *testing.T, opts ...dlocktest.Option) {
				ctx := t.Context()
				locker := dlocktest.New(t, opts...)
				ttl := 300 * time.Millisecond
				if n > 0 {
					ttl = 3 * dlocktest.QuorumNodeTimeout
				}
				a, err := locker.TryAcquire(ctx, "job", option.TTL(ttl))
				require.NoError(t, err, "TryAcquire")
				<-a.Done()
				require.ErrorIs(t, a.Err(), dlock.ErrExpired)

				// a never released: only the server's expiry frees the key.
				wctx, cancel := context.WithTimeout(ctx, wait)
				defer cancel()
				b, err := locker.Acquire(wctx, "job")
				require.NoError(t, err, "Acquire after a's TTL")
				require.Greater(t, b.Token(), a.Token())
				require.NoError(t, b.Release(ctx))
			})
		})
	}
}

// TestLockersExclude: two Lockers of one test lock on the same servers;
// one holds, the other is refused, and granted once the first releases.
func TestLockersExclude(t *testing.T) {
	for _, n := range []int{0, 3} {
		t.Run(fmt.Sprintf("quorum=%d", n), func(t *testing.T) {
			forEach(t, n, func(t *testing.T, opts ...dlocktest.Option) {
				ctx := t.Context()
				a, b := dlocktest.New(t, opts...), dlocktest.New(t, opts...)
				la, err := a.TryAcquire(ctx, "leader")
				require.NoError(t, err, "a's TryAcquire")
				_, err = b.TryAcquire(ctx, "leader")
				require.ErrorIs(t, err, dlock.ErrTaken, "b's TryAcquire while a holds")
				info, err := b.Inspect(ctx, "leader")
				require.NoError(t, err, "Inspect")
				require.True(t, info.Held)
				require.Equal(t, la.Owner(), info.Owner)

				got := make(chan error, 1)
				var lb *lease.Lease
				go func() {
					wctx, cancel := context.WithTimeout(ctx, wait)
					defer cancel()
					var err error
					lb, err = b.Acquire(wctx, "leader")
					got <- err
				}()
				require.NoError(t, la.Release(ctx))
				require.NoError(t, <-got, "b's Acquire after a's release")
				require.Greater(t, lb.Token(), la.Token())
				require.NoError(t, lb.Release(ctx))
			})
		})
	}
}

// TestNodePrimitives: permits, claims, rwlock and ratelimit work on a Node, which is
// the server New's Lockers lock on.
func TestNodePrimitives(t *testing.T) {
	forEach(t, 0, func(t *testing.T, opts ...dlocktest.Option) {
		ctx := t.Context()
		n := dlocktest.Node(t, opts...)

		// The same server as New's, in the same test.
		l, err := dlocktest.New(t, opts...).TryAcquire(ctx, "shared")
		require.NoError(t, err)
		lk, err := single.New(n)
		require.NoError(t, err)
		_, err = lk.TryAcquire(ctx, "shared")
		require.ErrorIs(t, err, dlock.ErrTaken, "a lock New's Locker holds, seen on Node")
		require.NoError(t, l.Release(ctx))

		t.Run("permits", func(t *testing.T) {
			sem, err := permits.New(n, option.TTL(10*time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sem.Close() })
			a, err := sem.Acquire(ctx, "export", 2)
			require.NoError(t, err)
			b, err := sem.Acquire(ctx, "export", 2)
			require.NoError(t, err)
			_, err = sem.TryAcquire(ctx, "export", 2)
			require.ErrorIs(t, err, dlock.ErrTaken, "a third permit of 2")
			require.NoError(t, a.Release(ctx))
			c, err := sem.TryAcquire(ctx, "export", 2)
			require.NoError(t, err, "the released permit")
			require.Greater(t, c.Token(), b.Token())
			require.NoError(t, b.Release(ctx))
			require.NoError(t, c.Release(ctx))
		})

		t.Run("claims", func(t *testing.T) {
			q, err := claims.New(n, "invoices")
			require.NoError(t, err)
			require.NoError(t, q.Add(ctx, "invoice:41", "invoice:42"))
			var ids []string
			for {
				c, err := q.Claim(ctx)
				if errors.Is(err, claims.ErrEmpty) {
					break
				}
				require.NoError(t, err)
				ids = append(ids, c.ID())
				require.NoError(t, c.Complete(ctx))
			}
			require.Equal(t, []string{"invoice:41", "invoice:42"}, ids)
		})

		t.Run("rwlock", func(t *testing.T) {
			lk, err := rwlock.New(n)
			require.NoError(t, err)
			t.Cleanup(func() { _ = lk.Close() })
			w, err := lk.TryAcquire(ctx, "doc")
			require.NoError(t, err, "writer")
			require.NoError(t, w.Release(ctx))
			r1, err := lk.TryAcquireShared(ctx, "doc")
			require.NoError(t, err, "first reader")
			r2, err := lk.TryAcquireShared(ctx, "doc")
			require.NoError(t, err, "second reader, beside the first")
			require.Equal(t, r1.Token(), r2.Token())
			require.Greater(t, r1.Token(), w.Token())
			_, err = lk.TryAcquire(ctx, "doc")
			require.ErrorIs(t, err, dlock.ErrTaken, "a writer while readers hold")
			require.NoError(t, r1.Release(ctx))
			require.NoError(t, r2.Release(ctx))
			w2, err := lk.TryAcquire(ctx, "doc")
			require.NoError(t, err, "a writer once the readers left")
			require.Greater(t, w2.Token(), r1.Token())
			require.NoError(t, w2.Release(ctx))
		})

		t.Run("ratelimit", func(t *testing.T) {
			rl, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 2, Per: time.Minute, Burst: 2})
			require.NoError(t, err)
			t.Cleanup(func() { _ = rl.Close() })
			for i := range 2 {
				r, err := rl.Allow(ctx, "mail")
				require.NoError(t, err)
				require.True(t, r.Allowed, "call %d of a burst of 2", i)
			}
			r, err := rl.Allow(ctx, "mail")
			require.NoError(t, err)
			require.False(t, r.Allowed, "a third call within the minute")
			require.Greater(t, r.RetryAfter, 20*time.Second, "a refill of one, 30 s less the calls' time")
		})
	})
}

// TestSubtestsOwnServers: in-process, a subtest is another t, with
// servers of its own, so its locks do not meet its parent's.
func TestSubtestsOwnServers(t *testing.T) {
	ctx := t.Context()
	l, err := dlocktest.New(t).TryAcquire(ctx, "k")
	require.NoError(t, err)
	t.Run("sub", func(t *testing.T) {
		m, err := dlocktest.New(t).TryAcquire(ctx, "k")
		require.NoError(t, err, "the subtest's own server")
		require.NoError(t, m.Release(ctx))
	})
	require.NoError(t, l.Release(ctx))
}

// TestEnv: DLOCK_TEST_ADDR and DLOCK_TEST_ADDRS send New and Node to the
// servers they name; a lock taken there is seen by a Locker opened on
// them directly.
func TestEnv(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	t.Setenv(dlocktest.EnvAddr, srv.Addr())
	var addrs []string
	for _, s := range redistest.StartN(t, 3) {
		addrs = append(addrs, s.Addr())
	}
	t.Setenv(dlocktest.EnvAddrs, " "+strings.Join(addrs, ", ")+" ")

	for _, tc := range []struct {
		name string
		opts []dlocktest.Option
		cfg  dlock.Config
	}{
		{"single", nil, dlock.Config{Addrs: []string{srv.Addr()}}},
		{"quorum", []dlocktest.Option{dlocktest.WithQuorum(3)}, dlock.Config{Strategy: connect.StrategyQuorum, Addrs: addrs, DurableNodes: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := dlocktest.New(t, tc.opts...).TryAcquire(ctx, tc.name)
			require.NoError(t, err)
			direct, err := dlock.Open(ctx, tc.cfg)
			require.NoError(t, err, "Open")
			t.Cleanup(func() { _ = direct.Close() })
			_, err = direct.TryAcquire(ctx, tc.name)
			require.ErrorIs(t, err, dlock.ErrTaken, "the lock New's Locker took, on the servers the environment names")
			require.NoError(t, l.Release(ctx))
		})
	}
	t.Run("in-process server by address", func(t *testing.T) {
		// As a TestMain would share one across a package's tests.
		srv, err := dlocktest.StartServer()
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		t.Setenv(dlocktest.EnvAddr, srv.Addr())
		l, err := dlocktest.New(t).TryAcquire(ctx, "shared")
		require.NoError(t, err)
		_, err = dlocktest.New(t, dlocktest.WithClient(connect.ClientValkeyGo)).TryAcquire(ctx, "shared")
		require.ErrorIs(t, err, dlock.ErrTaken)
		require.NoError(t, l.Release(ctx))
	})
	t.Run("node", func(t *testing.T) {
		l, err := dlocktest.New(t).TryAcquire(ctx, "node")
		require.NoError(t, err)
		lk, err := single.New(dlocktest.Node(t))
		require.NoError(t, err)
		_, err = lk.TryAcquire(ctx, "node")
		require.ErrorIs(t, err, dlock.ErrTaken)
		require.NoError(t, l.Release(ctx))
	})
}

// fatalT records how New or Node failed a test, and ends the goroutine
// that called them as t.Fatal does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Fatal(args ...any) { f.msg = fmt.Sprint(args...); runtime.Goexit() }
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestNilOption: New and Node skip a nil Option, as the constructors of
// dlock's packages skip the zero option.Option.
func TestNilOption(t *testing.T) {
	l := dlocktest.New(t, nil, dlocktest.WithTTL(time.Minute), nil)
	ls, err := l.TryAcquire(t.Context(), "nil-option")
	require.NoError(t, err)
	// WithTTL beside the nil Options applied: more left than the
	// default 30s.
	require.Greater(t, ls.TTL(), 45*time.Second)
	require.NoError(t, ls.Release(t.Context()))
	require.NotNil(t, dlocktest.Node(t, nil))
}

// TestFails: what New and Node cannot make fails the test, with a
// message that says why.
func TestFails(t *testing.T) {
	closed, err := dlocktest.StartServer()
	require.NoError(t, err)
	closed.Close()
	closed.Close() // twice is fine

	for _, tc := range []struct {
		name string
		node bool
		opts []dlocktest.Option
		want string
	}{
		{"negative quorum", false, []dlocktest.Option{dlocktest.WithQuorum(-1)}, "WithQuorum(-1)"},
		{"empty quorum", false, []dlocktest.Option{dlocktest.WithQuorum(0)}, "WithQuorum(0)"},
		{"unknown client", false, []dlocktest.Option{dlocktest.WithClient("redigo")}, `WithClient("redigo")`},
		// The client's rule is the table's, as Config, URL and flag say it.
		{"unknown client's rule", false, []dlocktest.Option{dlocktest.WithClient("redigo")}, `invalid Client "redigo": must be "go-redis" or "valkey-go"`},
		{"bad address", false, []dlocktest.Option{dlocktest.WithAddr("localhost")}, "host:port"},
		{"two addresses, single", false, []dlocktest.Option{dlocktest.WithAddr("127.0.0.1:1", "127.0.0.1:2")}, "exactly one"},
		{"short TTL", false, []dlocktest.Option{dlocktest.WithTTL(time.Millisecond)}, "invalid TTL 1ms"},
		{"short quorum TTL", false, []dlocktest.Option{dlocktest.WithQuorum(3), dlocktest.WithTTL(time.Millisecond)}, "invalid TTL 1ms"},
		{"no server", false, []dlocktest.Option{dlocktest.WithAddr(closed.Addr())}, "does not answer"},
		{"Node of a quorum", true, []dlocktest.Option{dlocktest.WithQuorum(3)}, "one server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fatalT{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.node {
					dlocktest.Node(f, tc.opts...)
				} else {
					dlocktest.New(f, tc.opts...)
				}
			}()
			<-done
			require.Contains(t, f.msg, tc.want)
		})
	}
}
