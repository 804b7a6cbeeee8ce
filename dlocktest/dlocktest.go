// Package dlocktest gives your own unit tests a working dlock.Locker, and
// the one server that packages permits, claims, rwlock and ratelimit (on
// one server) live on, with no server to set up. By default each test gets in-process servers
// (miniredis, on 127.0.0.1), started at its first call and closed when it
// ends, whose key expiry follows the wall clock: a lease nobody renews or
// releases ends after its TTL, as on a real server. Name a real server,
// with WithAddr or in the environment, and the same test runs against it:
//
//	DLOCK_TEST_ADDR=localhost:6379 go test ./...             # New and Node
//	DLOCK_TEST_ADDRS=h1:6379,h2:6379,h3:6379 go test ./...   # New with WithQuorum
//
// A test of your own code, here a report job that two instances of a
// service may start at once, and that must run on one of them only:
//
//	func TestReportRunsOnce(t *testing.T) {
//		ctx := t.Context()
//		locker := dlocktest.New(t)
//		a, b := report.NewJob(locker), report.NewJob(locker)
//
//		started, finish := make(chan struct{}), make(chan struct{})
//		a.Work = func(ctx context.Context, token fence.Token) error {
//			close(started)
//			<-finish
//			return nil
//		}
//		done := make(chan error)
//		go func() { _, err := a.Run(ctx); done <- err }()
//		<-started
//
//		ran, err := b.Run(ctx) // while a runs
//		require.NoError(t, err)
//		require.False(t, ran, "b ran while a held the lock")
//		close(finish)
//		require.NoError(t, <-done)
//	}
//
// Every Locker and Node one test asks for (one t) are on the same
// servers, as a service's instances share theirs; a subtest, being
// another t, gets servers of its own. A Locker serves many goroutines,
// and each acquisition is an owner of its own, so two instances of your
// code may share one Locker and still exclude each other. What New and
// Node return is closed when the test ends (t.Cleanup), before their
// servers; release what you acquired first, and close what you built on a
// Node (permits, claims, rwlock) in a cleanup registered after Node.
//
// On a real server, the tests that may run at once (t.Parallel, packages
// run side by side, go test -count) share its keys: give them keys of
// their own. dlocktest deletes nothing there, and a lease a failed test
// left holds until its TTL ends.
//
// An in-process server is not a deployment. It does not model:
//
//   - replication and failover: no replicas and no WAIT, so nothing of
//     option.Replicas or of a master lost before its replica heard;
//   - persistence and restarts: no RDB or AOF, no restart. A quorum here
//     declares its servers durable (option.DurableNodes): the
//     lost-data guard is off, and fresh servers vote at once;
//   - Redis Cluster and Sentinel: the servers are standalone;
//   - faults of time: the server's clock is the test process's, and
//     cannot be stepped, nor the server paused or cut off;
//   - performance: an in-process server says nothing of a real server's
//     latency or throughput (it runs each script on a fresh Lua state,
//     one at a time);
//   - the server's Lua: scripts run on miniredis's interpreter
//     (gopher-lua), not on Redis's or Valkey's. dlock's scripts are
//     tested on it (this package's tests), yours are not;
//   - ACLs, TLS, memory limits and eviction, and INFO beyond the run_id
//     dlock's scripts read.
//
// Test those on real servers, by naming them here or with dlock.Open.
package dlocktest

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// The environment variables that name real servers, when no WithAddr
// does: one host:port for New and Node, and a quorum's, comma-separated,
// for New with WithQuorum. Unset or empty, the servers are in-process.
const (
	EnvAddr  = "DLOCK_TEST_ADDR"
	EnvAddrs = "DLOCK_TEST_ADDRS"
)

// QuorumNodeTimeout bounds each call of a quorum's to one of its servers
// (dlock.Config.NodeTimeout). It is longer than the quorum's default, which
// is for servers on hosts of their own: a test's servers share its
// machine, and an in-process server runs its scripts slower still, the
// more so under the race detector.
const QuorumNodeTimeout = 250 * time.Millisecond

// Option changes what New and Node return.
type Option func(*config)

type config struct {
	addrs    []string
	client   string
	quorum   int
	isQuorum bool
	ttl      time.Duration
}

// WithAddr names real servers, as host:port, in place of in-process ones
// and of the environment: one for the single strategy, a quorum's N
// masters with WithQuorum.
func WithAddr(addrs ...string) Option { return func(c *config) { c.addrs = addrs } }

// WithClient chooses the client library: connect.ClientGoRedis (the
// default) or connect.ClientValkeyGo.
func WithClient(name string) Option { return func(c *config) { c.client = name } }

// WithQuorum makes New's Locker one of the quorum strategy (package
// quorum) over n in-process servers, or over every server WithAddr or
// DLOCK_TEST_ADDRS names. Its servers are declared durable (see the
// package doc), and its node timeout is QuorumNodeTimeout (a quarter of
// WithTTL's TTL, when that is shorter), so a lease on it must be longer
// than twice that. Node refuses it: permits, claims and rwlock live on
// one server.
func WithQuorum(n int) Option { return func(c *config) { c.quorum, c.isQuorum = n, true } }

// WithTTL sets the Locker's default lease TTL (dlock.Config.TTL); without
// it, the strategy's default (30s).
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// New returns a Locker of the single strategy on one in-process server,
// unless an option or the environment says otherwise (WithQuorum,
// WithAddr, DLOCK_TEST_ADDR). It is closed when t ends, and then the
// clients New made for it (go-redis or valkey-go, with the settings Open
// gives its own). New fails t (t.Fatal) when the Locker cannot be made: a
// bad option, a server that does not answer.
func New(t testing.TB, opts ...Option) *dlock.Client {
	t.Helper()
	c := configOf(opts)
	if err := settings.Of(settings.Client).Check(c.client); err != nil {
		t.Fatalf("dlocktest: WithClient(%q): %v", c.client, err)
		return nil
	}
	cfg := dlock.Config{TTL: c.ttl}
	if c.isQuorum {
		if c.quorum < 1 {
			t.Fatalf("dlocktest: WithQuorum(%d): want at least 1 server", c.quorum)
			return nil
		}
		cfg.Strategy = connect.StrategyQuorum
		// Servers here are fresh for every test: with the guard on, each
		// would sit out a maximum TTL before it voted.
		cfg.DurableNodes = true
		cfg.NodeTimeout = QuorumNodeTimeout
		if c.ttl > 0 && c.ttl/4 < cfg.NodeTimeout {
			cfg.NodeTimeout = c.ttl / 4
		}
	}
	addrs := c.addrs
	if len(addrs) == 0 {
		if c.isQuorum {
			addrs = split(os.Getenv(EnvAddrs))
		} else {
			addrs = split(os.Getenv(EnvAddr))
		}
	}
	if len(addrs) == 0 {
		var err error
		if addrs, err = serversOf(t, c.quorum); err != nil {
			t.Fatal(err)
			return nil
		}
	}
	// The clients are dlocktest's own, not Open's: Open checks each new
	// connection with an inline PING, which an in-process server (which
	// may be behind an address too) does not parse. They close after the
	// Locker: cleanups run last-registered first.
	nodes, closeAll, err := dial(addrs, c.client)
	if err != nil {
		t.Fatal(err)
		return nil
	}
	t.Cleanup(closeAll)
	cfg.Nodes = nodes
	l, err := dlock.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("dlocktest: a Locker on %s: %v", strings.Join(addrs, ","), err)
		return nil
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Node returns the server of a Locker New(t, opts...) made, for what
// lives on one server beside the locks: permits.New, claims.New,
// rwlock.New, ratelimit.New with this one node. It is the same server New(t) locks on, in-process or real;
// it is closed when t ends, after the cleanups registered after Node.
// Node fails t (t.Fatal) as New does, and with WithQuorum.
func Node(t testing.TB, opts ...Option) node.Node {
	t.Helper()
	c := configOf(opts)
	if c.isQuorum {
		t.Fatalf("dlocktest: Node with WithQuorum(%d): permits, claims and rwlock live on one server", c.quorum)
		return nil
	}
	l := New(t, opts...)
	if l == nil {
		return nil
	}
	return l.Nodes()[0]
}

// configOf applies opts, skipping a nil Option as the constructors of
// dlock's packages skip the zero option.Option.
func configOf(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// dial makes a Node for each address on a client of the library named,
// with the settings Open gives its own: no resends behind the strategies'
// back, one dial per call, no client-side cache. closeAll closes the
// Nodes, then their clients.
func dial(addrs []string, client string) (nodes []node.Node, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	for _, addr := range addrs {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			closeAll()
			return nil, nil, fmt.Errorf("dlocktest: server %q: want host:port", addr)
		}
		switch client {
		case "", connect.ClientGoRedis:
			c := redis.NewClient(&redis.Options{
				Addr:                     addr,
				ContextTimeoutEnabled:    true,
				DisableIdentity:          true,
				MaxRetries:               -1,
				DialerRetries:            1,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			})
			n := goredis.New(c)
			nodes = append(nodes, n)
			closers = append(closers, func() { _ = n.Close(); _ = c.Close() })
		case connect.ClientValkeyGo:
			c, err := valkey.NewClient(valkey.ClientOption{
				InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
			})
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("dlocktest: a valkey-go client for %s: %w", addr, err)
			}
			n := valkeygo.New(c)
			nodes = append(nodes, n)
			closers = append(closers, func() { _ = n.Close(); c.Close() })
		default:
			closeAll()
			return nil, nil, settings.Of(settings.Client).Refuse(client)
		}
	}
	return nodes, closeAll, nil
}

func split(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// A test's in-process servers: the one of the single strategy, and a
// quorum's, grown to the largest quorum the test asked for.
type servers struct {
	one    *Server
	quorum []*Server
}

var (
	mu     sync.Mutex
	byTest = map[testing.TB]*servers{}
)

// serversOf returns the addresses of t's in-process servers, n of a
// quorum's or, for n == 0, the single one, starting those t lacks.
func serversOf(t testing.TB, n int) ([]string, error) {
	mu.Lock()
	defer mu.Unlock()
	s, ok := byTest[t]
	if !ok {
		s = &servers{}
		byTest[t] = s
		// Registered before the Cleanup of any Locker on these servers,
		// so it runs after them all.
		t.Cleanup(func() {
			mu.Lock()
			delete(byTest, t)
			mu.Unlock()
			s.close()
		})
	}
	if n == 0 {
		if s.one == nil {
			srv, err := StartServer()
			if err != nil {
				return nil, err
			}
			s.one = srv
		}
		return []string{s.one.Addr()}, nil
	}
	for len(s.quorum) < n {
		srv, err := StartServer()
		if err != nil {
			return nil, err
		}
		s.quorum = append(s.quorum, srv)
	}
	addrs := make([]string, n)
	for i, srv := range s.quorum[:n] {
		addrs[i] = srv.Addr()
	}
	return addrs, nil
}

func (s *servers) close() {
	if s.one != nil {
		s.one.Close()
	}
	for _, srv := range s.quorum {
		srv.Close()
	}
}
