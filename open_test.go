package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
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

			lk, err = dlock.Open(ctx, dlock.Config{Strategy: connect.StrategyQuorum, Addrs: addrs, Client: client, DurableNodes: true})
			require.NoError(t, err, "quorum: Open does not need its servers")
			defer lk.Close()
			start = time.Now()
			l, err := lk.TryAcquire(ctx, "refused")
			took = time.Since(start)
			if err == nil {
				_ = l.Release(ctx)
				t.Fatalf("quorum: TryAcquire on refused servers succeeded")
			}
			var qe *quorum.Error
			require.ErrorAs(t, err, &qe)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("quorum: TryAcquire = %v; want no deadline in it", err)
			}
			refused := 0
			for _, a := range qe.Nodes {
				switch a.Kind {
				case quorum.KindError:
					if !strings.Contains(a.Err.Error(), "connection refused") {
						t.Errorf("quorum: %s answered %v; want connection refused", a.Node, a.Err)
					}
					refused++
				case quorum.KindNotAwaited:
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

// get returns the lines printed so far.
func (l *goRedisLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
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
		lk, err := dlock.Open(ctx, dlock.Config{Strategy: connect.StrategyQuorum, Addrs: []string{dead}, Client: client, DurableNodes: true})
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

// ownNode builds a Node for addr the way a caller with options of its own
// would: a client named name, closed when the test ends (after any
// Locker's Close).
func ownNode(t *testing.T, client, addr, name, password string) node.Node {
	t.Helper()
	switch client {
	case connect.ClientGoRedis:
		c := redis.NewClient(&redis.Options{Addr: addr, ClientName: name, Password: password, DisableIdentity: true, MaxRetries: -1})
		n := goredis.New(c)
		t.Cleanup(func() { _ = n.Close(); _ = c.Close() })
		return n
	default:
		c, _ := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, ClientName: name, Password: password,
			DisableCache: true, ForceSingleClient: true})
		require.NotNil(t, c)
		n := valkeygo.New(c)
		t.Cleanup(func() { _ = n.Close(); c.Close() })
		return n
	}
}

// TestOpenNodes: a Locker over the caller's own Nodes, for both strategies
// and both adapters, keeps the rest of the Config, runs on the caller's
// clients with their options, and leaves them open at Close.
func TestOpenNodes(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	ctx := t.Context()
	for _, client := range redistest.Clients {
		for _, strategy := range []string{connect.StrategySingle, connect.StrategyQuorum} {
			t.Run(client+"/"+strategy, func(t *testing.T) {
				name := "billing-" + strings.ReplaceAll(client, "-", "") + "-" + strategy
				servers := srvs[:1]
				if strategy == connect.StrategyQuorum {
					servers = srvs
				}
				var nodes []node.Node
				for _, s := range servers {
					nodes = append(nodes, ownNode(t, client, s.Addr(), name, ""))
				}
				rec := &eventLog{}
				lk, err := dlock.Open(ctx, dlock.Config{Strategy: strategy, Nodes: nodes, TTL: 5 * time.Second,
					DurableNodes: strategy == connect.StrategyQuorum, Observer: rec})
				require.NoError(t, err, "Open")
				l, err := lk.TryAcquire(ctx, name)
				require.NoError(t, err, "TryAcquire")
				if ttl := l.TTL(); ttl <= 0 || ttl > 5*time.Second {
					t.Errorf("TTL = %v; want within Config.TTL, 5s", ttl)
				}
				require.NoError(t, l.Release(ctx))
				rec.expect(t, strategy, observe.AcquireStarted, observe.AcquireEnded, observe.Released)
				for _, s := range servers {
					list, err := s.Do("CLIENT", "LIST")
					require.NoError(t, err)
					if !strings.Contains(list, "name="+name) {
						t.Errorf("%s: no connection named %s: the Locker did not use the caller's clients", s.Addr(), name)
					}
				}

				require.NoError(t, lk.Close())
				for _, n := range nodes {
					if _, err := n.Eval(ctx, node.NewScript("return 1"), nil); err != nil {
						t.Errorf("%s after the Locker's Close: %v; want the caller's Node and client still open", n, err)
					}
				}
			})
		}
	}
}

// TestOpenNodesChecked: Open pings the caller's Node for the single
// strategy (a dead server, a refused password), and refuses a Config that
// names servers twice or sets what only Open's own clients use.
func TestOpenNodesChecked(t *testing.T) {
	srv := redistest.Start(t)
	_, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret")
	require.NoError(t, err)
	dead := deadAddr(t)
	ctx := t.Context()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			lk, err := dlock.Open(ctx, dlock.Config{Nodes: []node.Node{ownNode(t, client, dead, "", "")}})
			if err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("Open on a dead caller's Node = %v; want connection refused", err)
			}
			if lk != nil {
				lk.Close()
			}
			lk, err = dlock.Open(ctx, dlock.Config{Nodes: []node.Node{ownNode(t, client, srv.Addr(), "", "wrong")}})
			if !errors.Is(err, dlock.ErrAuth) || !strings.Contains(err.Error(), "authentication failed") {
				t.Errorf("Open with a caller's Node on a wrong password = %v; want ErrAuth", err)
			}
			if lk != nil {
				lk.Close()
			}
			lk, err = dlock.Open(ctx, dlock.Config{Nodes: []node.Node{ownNode(t, client, srv.Addr(), "", "s3cret")}})
			require.NoError(t, err, "Open with the right password")
			require.NoError(t, lk.Close())
		})
	}

	a := ownNode(t, connect.ClientGoRedis, srv.Addr(), "", "s3cret")
	b := ownNode(t, connect.ClientGoRedis, dead, "", "")
	for _, tc := range []struct {
		name string
		cfg  dlock.Config
		arg  string
	}{
		{"addrs and nodes", dlock.Config{Addrs: []string{srv.Addr()}, Nodes: []node.Node{a}}, "Addrs and Nodes"},
		{"two for single", dlock.Config{Nodes: []node.Node{a, b}}, "Nodes"},
		{"nil", dlock.Config{Strategy: connect.StrategyQuorum, Nodes: []node.Node{a, nil}}, "Nodes"},
		{"repeated", dlock.Config{Strategy: connect.StrategyQuorum, Nodes: []node.Node{a, b, a}}, "Nodes"},
		{"client", dlock.Config{Nodes: []node.Node{a}, Client: connect.ClientValkeyGo}, "Client"},
		{"password", dlock.Config{Nodes: []node.Node{a}, Password: "s3cret"}, "Password"},
		{"db", dlock.Config{Nodes: []node.Node{a}, DB: 2}, "DB"},
		{"dial timeout", dlock.Config{Nodes: []node.Node{a}, DialTimeout: time.Second}, "DialTimeout"},
		{"ttl", dlock.Config{Nodes: []node.Node{a}, TTL: time.Millisecond}, "TTL"},
	} {
		lk, err := dlock.Open(ctx, tc.cfg)
		var ae *lease.ArgError
		if lk != nil || !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("Open(%s) = %v, %v; want *ArgError for %s", tc.name, lk, err, tc.arg)
		}
	}
}

// TestNodesCarryPermits: the server of a single Client carries permits
// beside its locks, on Open's own client, and closes with the Client.
func TestNodesCarryPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	lk, err := dlock.Open(ctx, dlock.Config{Addrs: []string{srv.Addr()}})
	require.NoError(t, err)
	n := lk.Nodes()[0]
	sem, err := permits.New(n)
	require.NoError(t, err)
	p, err := sem.TryAcquire(ctx, "pool", 1)
	require.NoError(t, err)
	if _, err := sem.TryAcquire(ctx, "pool", 1); !errors.Is(err, lease.ErrTaken) {
		t.Errorf("second permit of one: %v; want ErrTaken", err)
	}
	require.NoError(t, p.Release(ctx))
	require.NoError(t, lk.Close())
	if _, err := n.Eval(ctx, node.NewScript("return 1"), nil); err == nil {
		t.Error("the Node answered after the Client's Close; want it closed with it")
	}
}

// TestOpenClusterQuietDead: a cluster client Open builds prints nothing
// when no node of the cluster answers, with either client: the error
// reaches the caller from Open.
func TestOpenClusterQuietDead(t *testing.T) {
	dead := deadAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, client := range redistest.Clients {
		rec := recordGoRedisLog(t)
		lk, err := dlock.Open(ctx, dlock.Config{Cluster: true, Addrs: []string{dead}, Client: client})
		if err == nil {
			lk.Close()
			t.Fatalf("%s: Open of a dead cluster succeeded", client)
		}
		if got := rec.get(); len(got) > 0 {
			t.Errorf("%s: go-redis printed %q; want nothing", client, got)
		}
	}
}

// TestNodes: a Client names the servers it runs on, one for single and
// each node for a quorum, in order, so a rate limit runs beside the locks
// on either strategy; so does a strategy's own Locker.
func TestNodes(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	ctx := t.Context()
	addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	lk, err := dlock.Open(ctx, dlock.Config{Addrs: addrs[:1]})
	require.NoError(t, err)
	defer lk.Close()
	q, err := dlock.Open(ctx, dlock.Config{Strategy: connect.StrategyQuorum, Addrs: addrs, DurableNodes: true})
	require.NoError(t, err)
	defer q.Close()
	own, err := single.New(redistest.NodeFor(t, "go-redis", addrs[0]))
	require.NoError(t, err)
	defer own.Close()
	for _, c := range []struct {
		nodes []node.Node
		want  []string
	}{{lk.Nodes(), addrs[:1]}, {q.Nodes(), addrs}, {own.Nodes(), addrs[:1]}} {
		var got []string
		for _, n := range c.nodes {
			got = append(got, n.String())
			if _, err := n.Eval(ctx, node.NewScript("return 1"), nil); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Nodes: %v; want %v", got, c.want)
		}
	}
	if lk.Strategy() != "single" || q.Strategy() != "quorum" {
		t.Errorf("Strategy() = %q, %q; want single, quorum", lk.Strategy(), q.Strategy())
	}
}
