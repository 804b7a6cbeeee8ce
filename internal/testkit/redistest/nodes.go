package redistest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	redigonode "github.com/dlockgo/dlock/node/redigo"
	rueidisnode "github.com/dlockgo/dlock/node/rueidis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
)

// WarmRounds is how many calls a test makes through a client before it
// slows or breaks the link, so that every connection of the client is
// open: valkey-go sends each command on one of its four connections to a
// node, chosen at random, and dials each lazily; a dial inside a fault
// would cost a round trip (HELLO) of its own. 32 rounds leave one of the
// four unused with odds of about 1e-4.
const WarmRounds = 32

// Clients names the client libraries the suite runs every test with, in
// the order Nodes returns them: the two that dlock.Open builds clients of.
// A test of a strategy or primitive loops over these. With DLOCK_CLIENTS
// set (names of these, comma-separated), only the ones it names: the
// suite runs each server with one, go-redis under the race detector on
// Redis 7.0 and each library again on a Redis and a Valkey of
// scripts/test-servers.sh.
var Clients = clientsFrom(os.Getenv("DLOCK_CLIENTS"), OpenClients)

// OpenClients names the two client libraries dlock.Open builds clients
// of, whatever DLOCK_CLIENTS says: for a test that must use both (a
// quorum of mixed libraries, a second process on the other library).
var OpenClients = []string{"go-redis", "valkey-go"}

// clientsFrom is the names in env, a comma-separated list of names in
// all, or all when env is empty. A name not in all panics: a test run
// with a misspelt DLOCK_CLIENTS must not pass having run nothing.
func clientsFrom(env string, all []string) []string {
	if env == "" {
		return all
	}
	var out []string
	for name := range strings.SplitSeq(env, ",") {
		if !slices.Contains(all, name) {
			panic(fmt.Sprintf("redistest: DLOCK_CLIENTS names %q; want a comma-separated list of %q", name, all))
		}
		out = append(out, name)
	}
	return out
}

// OtherClient is the library of OpenClients that is not client: a second
// process's.
func OtherClient(client string) string {
	if client == OpenClients[0] {
		return OpenClients[1]
	}
	return OpenClients[0]
}

// AllClients names every client library a Node can be built on, in the
// order AllNodes returns them: Clients, then the adapters a user reaches
// only by wrapping a client of their own (rueidis, redigo). The adapter
// tests of package node loop over these, and each strategy has one
// end-to-end test that does; the rest of the suite stays on Clients, as
// the adapters share all that is above node.Node and the suite's time is
// bounded.
var AllClients = []string{"go-redis", "valkey-go", "rueidis", "redigo"}

// NamedNode is a Node and the name of the client library behind it, for
// t.Run.
type NamedNode struct {
	Name string
	Node node.Node
}

// Nodes returns one Node per client library for addr, so a test can run
// every case with each:
//
//	for _, c := range redistest.Nodes(t, srv.Addr()) {
//		t.Run(c.Name, func(t *testing.T) { ... c.Node ... })
//	}
//
// The Nodes and their clients are closed when the test ends.
func Nodes(t testing.TB, addr string) []NamedNode {
	t.Helper()
	out := make([]NamedNode, len(Clients))
	for i, name := range Clients {
		out[i] = NamedNode{Name: name, Node: NodeFor(t, name, addr)}
	}
	return out
}

// AllNodes is Nodes for AllClients.
func AllNodes(t testing.TB, addr string) []NamedNode {
	t.Helper()
	out := make([]NamedNode, len(AllClients))
	for i, name := range AllClients {
		out[i] = NamedNode{Name: name, Node: NodeFor(t, name, addr)}
	}
	return out
}

// NodeFor returns a Node for addr on the client library named client (one
// of AllClients), closed with its client when the test ends.
func NodeFor(t testing.TB, client, addr string) node.Node {
	t.Helper()
	switch client {
	case "go-redis":
		c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
		n := goredis.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			_ = c.Close()
		})
		return n
	case "valkey-go":
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatalf("redistest: valkey-go client for %s: %v", addr, err)
		}
		n := valkeygo.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			c.Close()
		})
		return n
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatalf("redistest: rueidis client for %s: %v", addr, err)
		}
		n := rueidisnode.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			c.Close()
		})
		return n
	case "redigo":
		p := RedigoPool(addr)
		n := redigonode.New(p, addr)
		t.Cleanup(func() {
			_ = n.Close()
			_ = p.Close()
		})
		return n
	default:
		t.Fatalf("redistest: unknown client %q (want one of %v)", client, AllClients)
		return nil
	}
}

// RedigoPool returns a redigo pool of connections to addr, as a service
// would configure one for up to 64 callers at once: as many connections
// kept idle as may be active, and a caller that finds 64 in use waits for
// one rather than failing.
func RedigoPool(addr string, opts ...redigoredis.DialOption) *redigoredis.Pool {
	return &redigoredis.Pool{
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", addr, opts...)
		},
		MaxIdle:     64,
		MaxActive:   64,
		Wait:        true,
		IdleTimeout: time.Minute,
	}
}

// Acquirer is what Warm needs of a Locker of either strategy.
type Acquirer interface {
	TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
}

// Warm makes WarmRounds lock and unlock rounds through lk, each on a key of
// its own ("warm-0", "warm-1", ...), so that its connections are open and
// its scripts loaded before a test breaks anything, as in a service that
// has been running. An attempt may fail while that is not done yet (a
// quorum call on a cold connection of a loaded machine can outlast the
// node timeout): each round tries up to warmTries times. It fails the
// test when a round still fails.
func Warm(t testing.TB, lk Acquirer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range WarmRounds {
		var (
			l   *lease.Lease
			err error
		)
		for range warmTries {
			if l, err = lk.TryAcquire(ctx, WarmKey(i)); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("redistest: warm-up acquire: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("redistest: warm-up release: %v", err)
		}
	}
}

// warmTries bounds the attempts of one warm-up round.
const warmTries = 5

// WarmKey is the key of Warm's round i, i < WarmRounds: a test that counts
// what locks leave on a server counts these too.
func WarmKey(i int) string { return "warm-" + strconv.Itoa(i) }

// Locker is what LockOnce needs of either strategy.
type Locker interface {
	Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
}

// LockOnce locks and releases each of n keys, name(0) to name(n-1), once
// through lk, from workers goroutines, as a service with a lock per entity
// does; it fails t on the first error. Acquire, not TryAcquire: an attempt
// may time out on a loaded machine.
func LockOnce(t testing.TB, lk Locker, n, workers int, name func(i int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				l, err := lk.Acquire(ctx, name(i))
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					t.Errorf("redistest: lock %q once: %v", name(i), err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// WaitKeysGone waits, for up to within, until s holds no key that match
// accepts, and fails t with the ones left if it still does. The server's
// active expiry sweeps keys that are due in rounds, a few thousand a
// second.
func (s *Server) WaitKeysGone(t testing.TB, within time.Duration, match func(key string) bool) {
	t.Helper()
	start := time.Now()
	for {
		ks, err := s.Keys()
		if err != nil {
			t.Fatalf("redistest: keys of %s: %v", s.Addr(), err)
		}
		var left []string
		for _, k := range ks {
			if match(k) {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Since(start) > within {
			t.Fatalf("redistest: %s: %d keys left after %v, e.g. %q", s.Addr(), len(left), time.Since(start), left[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settledCalls is how many calls in a row Settled wants answered: a
// client that pipelines on several connections (valkey-go keeps up to
// four per server and picks one at random for a call with keys) may have
// a connection a restart or a cut broke that it has not noticed yet, and
// fails the first call sent on it. With four, the chance that one such
// connection escapes 32 random picks is (3/4)^32, about 1e-4.
const settledCalls = 32

// Settled calls call until it succeeds settledCalls times in a row, or
// fails the test after 10 s: after a restart or a restored link, a test
// that asserts on what a client does next must not meet, instead, a
// connection the fault broke that the client has not yet noticed.
func Settled(t testing.TB, call func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for ok := 0; ok < settledCalls; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = call(ctx)
		cancel()
		if err == nil {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			t.Fatalf("redistest: calls still fail 10s after the fault: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Receive returns the next message on msgs (a node.Node's Subscribe, a
// Watch), failing t when none comes in a few seconds: a bound on a hang,
// not a measure of speed.
func Receive(t testing.TB, msgs <-chan string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return ""
	}
}
