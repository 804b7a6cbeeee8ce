package election_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// TestMain checks that every goroutine ends, but two of toxiproxy v2.5.0,
// which the tests that cut a process off use: it leaves a connection's
// toxic stub, and the reader that feeds it, blocked for good on a send
// when a timeout toxic held the connection and toxics were then removed:
// its own leak, per connection, holding no resource of ours (the proxies
// themselves stop, and are still checked). go-redis redials a dead server
// from a goroutine of its pool that checks for the client's Close once a
// second.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(examplemain.With(m, 1),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

const (
	strategySingle = "single"
	strategyQuorum = "quorum"
)

// testNodeTimeout replaces the quorum's 50ms default node timeout, as in
// the quorum's tests: servers of a loaded machine answer a first call on a
// new connection slower than that. Quorum TTLs must be above twice it.
const testNodeTimeout = 250 * time.Millisecond

// wait bounds every wait for something that must happen: a bound on a
// hang, not a measure of speed.
const wait = 10 * time.Second

// env is one strategy's servers, and the client library a test reaches
// them with: one server for single, five nodes for the quorum.
type env struct {
	strategy, client string
	srvs             []*redistest.Server
}

// forEach runs f for each strategy and client. The two clients of a
// strategy share its servers: tests name their offices after the client.
func forEach(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, s := range []string{strategySingle, strategyQuorum} {
		t.Run(s, func(t *testing.T) {
			n := 1
			if s == strategyQuorum {
				n = 5
			}
			srvs := redistest.StartN(t, n)
			for _, c := range redistest.Clients {
				t.Run(c, func(t *testing.T) { f(t, &env{strategy: s, client: c, srvs: srvs}) })
			}
		})
	}
}

// office names an office of this test, apart from the other client's.
func (e *env) office(what string) string { return what + "-" + e.client }

// lockerConf is what a test sets on the Lockers it builds.
type lockerConf struct {
	ttl  time.Duration // 0: the strategy's default
	idle time.Duration // 0: the strategy's default
}

// locker is what the tests lock with: a strategy's Locker, which an
// election campaigns through.
type locker interface {
	dlock.Locker
	election.Locker
}

// lockerOn returns a Locker of e's strategy over addrs, closed when the
// test ends.
func (e *env) lockerOn(t testing.TB, addrs []string, c lockerConf) locker {
	t.Helper()
	nodes := nodesFor(t, e.client, addrs)
	var (
		lk  locker
		err error
	)
	if e.strategy == strategySingle {
		var opts []option.Option
		if c.ttl != 0 {
			opts = append(opts, option.TTL(c.ttl))
		}
		if c.idle != 0 {
			opts = append(opts, option.IdleTTL(c.idle))
		}
		lk, err = single.New(nodes[0], opts...)
	} else {
		opts := []option.Option{option.NodeTimeout(testNodeTimeout), option.DurableNodes(true)}
		if c.ttl != 0 {
			opts = append(opts, option.TTL(c.ttl))
		}
		if c.idle != 0 {
			opts = append(opts, option.IdleTTL(c.idle))
		}
		lk, err = quorum.New(nodes, opts...)
	}
	require.NoError(t, err, "new %s Locker", e.strategy)
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// locker returns a Locker straight to e's servers: one more process.
func (e *env) locker(t testing.TB, c lockerConf) locker {
	t.Helper()
	addrs := make([]string, len(e.srvs))
	for i, s := range e.srvs {
		addrs[i] = s.Addr()
	}
	return e.lockerOn(t, addrs, c)
}

// links are the proxies between one process and every server.
type links []*redistest.Proxy

// cut partitions the process from every server, as if it died or froze:
// what it sends is lost, and it hears nothing.
func (ls links) cut() {
	for _, p := range ls {
		p.Cut()
	}
}

func (ls links) restore() {
	for _, p := range ls {
		p.Restore()
	}
}

// waitLinked waits until lk answers an Inspect of key again, after a cut.
func waitLinked(t testing.TB, lk locker, key string) {
	t.Helper()
	redistest.Settled(t, func(ctx context.Context) error {
		_, err := lk.Inspect(ctx, key)
		return err
	})
}

// cuttable returns a Locker that reaches e's servers through proxies, and
// the proxies, to cut that process off.
func (e *env) cuttable(t testing.TB, c lockerConf) (locker, links) {
	t.Helper()
	var (
		ls    links
		addrs []string
	)
	for _, s := range e.srvs {
		p := redistest.StartProxy(t, s.Addr())
		ls = append(ls, p)
		addrs = append(addrs, p.Addr())
	}
	return e.lockerOn(t, addrs, c), ls
}

func newElection(t testing.TB, lk locker, name string, opts ...option.Option) *election.Election {
	t.Helper()
	el, err := election.New(lk, name, opts...)
	require.NoError(t, err, "election.New")
	return el
}

func campaign(t testing.TB, el *election.Election, value string) *election.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	term, err := el.Campaign(ctx, value)
	require.NoError(t, err, "Campaign(%q)", value)
	return term
}

// observe starts an observer that ends with the test.
func observe(t testing.TB, el *election.Election) <-chan election.Leader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := el.Observe(ctx)
	require.NoError(t, err, "Observe")
	t.Cleanup(func() {
		cancel()
		for range ch {
		}
	})
	return ch
}

// next returns the next leader ch delivers.
func next(t testing.TB, ch <-chan election.Leader) election.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return l
	case <-time.After(wait):
		t.Fatal("Observe delivered nothing")
		return election.Leader{}
	}
}

// nextLeader returns the next leader ch delivers that is not a vacancy,
// failing t if it sees any other leader than one whose value is want.
func nextLeader(t testing.TB, ch <-chan election.Leader, want string) election.Leader {
	t.Helper()
	for {
		l := next(t, ch)
		if l == (election.Leader{}) {
			continue
		}
		if l.Value != want {
			t.Fatalf("Observe delivered %+v; want %q (or a vacancy)", l, want)
		}
		return l
	}
}

// ended waits for term's end.
func ended(t *testing.T, term *election.Term) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(wait):
		t.Fatalf("term of %q has not ended", term.Value())
	}
}

// held is a term as the safety checker reads a lease: its owner is its
// value and token, unique per term.
type held struct{ *election.Term }

func (h held) Owner() string { return h.Value() + "#" + h.Token().String() }

// nodesFor returns a Node per address on client.
func nodesFor(t testing.TB, client string, addrs []string) []node.Node {
	t.Helper()
	out := make([]node.Node, len(addrs))
	for i, a := range addrs {
		out[i] = redistest.NodeFor(t, client, a)
	}
	return out
}

// waitQueued waits until n candidates queue for the lock on key: on the
// server, or on a majority of the quorum's nodes.
func (e *env) waitQueued(t testing.TB, key string, n int) {
	t.Helper()
	queue := keyname.Single(key) + ":q"
	if e.strategy == strategyQuorum {
		queue = keyname.Quorum(key) + ":queue"
	}
	deadline := time.Now().Add(wait)
	for {
		enough := 0
		for _, s := range e.srvs {
			out, err := s.Do("ZCARD", queue)
			require.NoError(t, err)
			if c, _ := strconv.Atoi(out); c >= n {
				enough++
			}
		}
		if enough > len(e.srvs)/2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d candidates queued for %q on %d of %d servers; want %d on a majority", n, key, enough, len(e.srvs), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// numsub returns how many subscribers the servers count on channel: the
// most any one of them counts.
func numsub(t *testing.T, e *env, channel string) string {
	t.Helper()
	most := 0
	for _, s := range e.srvs {
		out, err := s.Do("PUBSUB", "NUMSUB", channel)
		require.NoError(t, err)
		n, err := strconv.Atoi(strings.TrimPrefix(out, channel+"\n"))
		require.NoError(t, err, "PUBSUB NUMSUB: %q", out)
		most = max(most, n)
	}
	return strconv.Itoa(most)
}
