package ratelimit_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/examplemain"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/ratelimit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(examplemain.With(m, 3), redistest.ClientGoroutines()...)
}

func newLimiter(t testing.TB, nodes []node.Node, l ratelimit.Limit, opts ...option.Option) *ratelimit.Limiter {
	t.Helper()
	lim, err := ratelimit.New(nodes, l, opts...)
	require.NoError(t, err, "New")
	t.Cleanup(func() { require.NoError(t, lim.Close(), "Close") })
	return lim
}

// forEachClient runs f once per client library, each against a fresh server.
func forEachClient(t *testing.T, f func(t *testing.T, srv *redistest.Server, n node.Node)) {
	t.Helper()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			f(t, srv, redistest.NodeFor(t, client, srv.Addr()))
		})
	}
}

// slowMachine is the node timeout of the tests that want every node's
// answer, and every refund and charge made, on a loaded machine: the
// default 100 ms is for the checks, which count what a timeout costs.
var slowMachine = option.NodeTimeout(2 * time.Second)

// nodesFor returns a Node on client for each of srvs, in order.
func nodesFor(t testing.TB, client string, srvs []*redistest.Server) []node.Node {
	t.Helper()
	nodes := make([]node.Node, len(srvs))
	for i, s := range srvs {
		nodes[i] = redistest.NodeFor(t, client, s.Addr())
	}
	return nodes
}

func TestNewArgs(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	for _, c := range []struct {
		nodes []node.Node
		limit ratelimit.Limit
		opts  []option.Option
		arg   string
	}{
		{nil, ratelimit.Limit{Rate: 1, Per: time.Second}, nil, "nodes"},
		{[]node.Node{n, nil}, ratelimit.Limit{Rate: 1, Per: time.Second}, nil, "nodes"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 0, Per: time.Second}, nil, "limit.Rate"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 1}, nil, "limit.Per"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 1, Per: -time.Second}, nil, "limit.Per"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 1, Per: time.Second, Burst: -1}, nil, "limit.Burst"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 2000, Per: time.Millisecond}, nil, "limit.Rate"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 1, Per: 24 * time.Hour, Burst: 400}, nil, "limit.Burst"},
		{[]node.Node{n}, ratelimit.Limit{Rate: 1, Per: time.Second}, []option.Option{option.NodeTimeout(-1)}, "NodeTimeout"},
	} {
		_, err := ratelimit.New(c.nodes, c.limit, c.opts...)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(%d nodes, %+v): %v; want an *ArgError on %q", len(c.nodes), c.limit, err, c.arg)
		}
	}
	lim := newLimiter(t, []node.Node{n}, ratelimit.Limit{Rate: 3, Per: time.Second})
	if got := lim.Limit().Burst; got != 3 {
		t.Errorf("Burst = %d; want Rate, 3, for a zero Burst", got)
	}
	ctx := t.Context()
	for _, c := range []struct {
		key string
		n   int
		arg string
	}{
		{"", 1, "key"},
		{"k", 0, "n"},
		{"k", 4, "n"}, // above the burst: never admitted
	} {
		_, err := lim.AllowN(ctx, c.key, c.n)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("AllowN(%q, %d): %v; want an *ArgError on %q", c.key, c.n, err, c.arg)
		}
		_, err = lim.WaitN(ctx, c.key, c.n)
		if !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("WaitN(%q, %d): %v; want an *ArgError on %q", c.key, c.n, err, c.arg)
		}
	}
	var nilCtx context.Context // the bad argument under test
	if _, err := lim.Allow(nilCtx, "k"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Allow(nil ctx): %v; want ErrInvalid", err)
	}
	keys, err := srv.Keys()
	require.NoError(t, err)
	if len(keys) != 0 {
		t.Errorf("refused arguments left keys %v", keys)
	}
}

// A burst is admitted at once, then the limit refuses, says when to
// retry, and admits again then; the key expires once the limit is full.
func TestAllowBurst(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lim := newLimiter(t, []node.Node{n}, ratelimit.Limit{Rate: 10, Per: time.Second, Burst: 5})
		ctx := t.Context()
		for i := range 5 {
			r, err := lim.Allow(ctx, "api")
			require.NoError(t, err)
			if !r.Allowed || r.Remaining != 4-i || r.RetryAfter != 0 {
				t.Fatalf("call %d: %+v; want admitted, %d remaining, no retry", i, r, 4-i)
			}
			if r.ResetAfter <= 0 || r.ResetAfter > time.Duration(i+1)*100*time.Millisecond {
				t.Errorf("call %d: ResetAfter %v; want in (0, %v]", i, r.ResetAfter, time.Duration(i+1)*100*time.Millisecond)
			}
		}
		r, err := lim.Allow(ctx, "api")
		require.NoError(t, err)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter > 100*time.Millisecond {
			t.Fatalf("sixth call: %+v; want refused, 0 remaining, retry within 100ms", r)
		}
		pttl := srv.MustDo(t, "PTTL", ratelimit.KeyOf("api"))
		if ms, _ := strconv.Atoi(pttl); ms <= 0 || ms > 500 {
			t.Errorf("PTTL %s; want the time to refill the burst, at most 500 ms", pttl)
		}
		time.Sleep(r.RetryAfter)
		r, err = lim.Allow(ctx, "api")
		require.NoError(t, err)
		if !r.Allowed {
			t.Errorf("after RetryAfter: %+v; want admitted", r)
		}
		// A refused AllowN of more than remain writes nothing, and says
		// how many remain.
		r, err = lim.AllowN(ctx, "api", 5)
		require.NoError(t, err)
		if r.Allowed || r.RetryAfter < 400*time.Millisecond {
			t.Errorf("AllowN(5) on an empty limit: %+v; want refused, retry after ~500ms", r)
		}
		srv.WaitKeysGone(t, 2*time.Second, func(string) bool { return true })
		r, err = lim.AllowN(ctx, "api", 5)
		require.NoError(t, err)
		if !r.Allowed || r.Remaining != 0 {
			t.Errorf("AllowN(5) once refilled: %+v; want admitted, none remaining", r)
		}
	})
}

func TestWait(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lim := newLimiter(t, []node.Node{n}, ratelimit.Limit{Rate: 20, Per: time.Second, Burst: 1})
		ctx := t.Context()
		start := time.Now()
		for range 3 {
			r, err := lim.Wait(ctx, "job")
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
		if el := time.Since(start); el < 90*time.Millisecond {
			t.Errorf("3 waits at 20/s, burst 1, took %v; want at least 100ms", el)
		}
		// A deadline before the next admission ends the wait at once.
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err := lim.Wait(short, "job")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait with a 10ms deadline: %v; want DeadlineExceeded", err)
		}
		// A cancelled context ends the wait with its error.
		lim2 := newLimiter(t, []node.Node{n}, ratelimit.Limit{Rate: 1, Per: time.Hour})
		_, err = lim2.Allow(ctx, "slow")
		require.NoError(t, err)
		cctx, ccancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, ccancel)
		_, err = lim2.Wait(cctx, "slow")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait cancelled: %v; want context.Canceled", err)
		}
	})
}

func TestClosed(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	lim, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 1, Per: time.Second})
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	if _, err := lim.Allow(t.Context(), "k"); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Allow after Close: %v; want ErrClosed", err)
	}
}

// A quorum admits while a majority answers, and fails with ErrNoQuorum
// once a majority is down; a node back without its data does not widen
// the limit on its own.
func TestQuorum(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srvs := redistest.StartN(t, 3)
			nodes := nodesFor(t, client, srvs)
			lim := newLimiter(t, nodes, ratelimit.Limit{Rate: 2, Per: time.Hour}, slowMachine)
			require.Equal(t, 2, lim.Majority())
			ctx := t.Context()
			r, err := lim.Allow(ctx, "q")
			require.NoError(t, err)
			require.True(t, r.Allowed, "%+v", r)
			if r.Remaining != 1 {
				t.Errorf("Remaining %d; want 1", r.Remaining)
			}
			srvs[0].Kill()
			r, err = lim.Allow(ctx, "q")
			require.NoError(t, err)
			if !r.Allowed || r.Remaining != 0 {
				t.Errorf("with one of three down: %+v; want admitted, 0 remaining", r)
			}
			srvs[0].Restart() // empty: a full burst of its own
			r, err = lim.Allow(ctx, "q")
			require.NoError(t, err)
			if r.Allowed || r.RetryAfter < 29*time.Minute {
				t.Errorf("one node back empty: %+v; want refused by the other two, retry in ~30m", r)
			}
			srvs[1].Kill()
			srvs[2].Kill()
			// A fresh key, which the node left admits: whichever answer
			// comes first, two failures leave no majority. (On "q" its
			// refusal, arriving before the failures, decides the call
			// as refused: no majority could have admitted.)
			_, err = lim.Allow(ctx, "q2")
			if !errors.Is(err, ratelimit.ErrNoQuorum) {
				t.Errorf("two of three down: %v; want ErrNoQuorum", err)
			}
		})
	}
}

// A request the quorum refused is refunded on the node that admitted it:
// its key is left as it was. A refund that would undo more than the
// admission, because a later admission stands on it, is not made.
func TestQuorumRefund(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srvs := redistest.StartN(t, 3)
			nodes := nodesFor(t, client, srvs)
			limit := ratelimit.Limit{Rate: 1, Per: time.Hour}
			lim := newLimiter(t, nodes, limit, slowMachine)
			ctx := t.Context()
			// Spend the limit on nodes 1 and 2 alone.
			for _, n := range nodes[1:] {
				one := newLimiter(t, []node.Node{n}, limit)
				r, err := one.Allow(ctx, "refund")
				require.NoError(t, err)
				require.True(t, r.Allowed)
			}
			r, err := lim.Allow(ctx, "refund")
			require.NoError(t, err)
			if r.Allowed {
				t.Fatalf("admitted with two of three nodes spent: %+v", r)
			}
			// Node 0 admitted, the quorum refused: node 0 is refunded, and
			// keeps nothing (its limit is full again).
			srvs[0].WaitKeysGone(t, 2*time.Second, func(string) bool { return true })
			// Nodes 1 and 2 still hold their own admissions.
			for _, s := range srvs[1:] {
				if s.MustDo(t, "EXISTS", ratelimit.KeyOf("refund")) != "1" {
					t.Errorf("%s lost its admission", s.Addr())
				}
			}
		})
	}
}

// TestCluster: the limit's key carries its hash tag, so the limit works
// through each client's cluster client, on whichever master serves the
// key's slot, for keys spread over the masters and a key starting "}".
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			lim := newLimiter(t, []node.Node{c.Node}, ratelimit.Limit{Rate: 2, Per: time.Hour})
			masters := map[int]bool{}
			for i := range 12 {
				key := c.Name + "-" + strconv.Itoa(i)
				if i == 0 {
					key = "}" + key
				}
				masters[cl.Owner(cl.Slot(ratelimit.KeyOf(key)))] = true
				for j, want := range []bool{true, true, false} {
					r, err := lim.Allow(t.Context(), key)
					require.NoError(t, err, "key %q call %d", key, j)
					if r.Allowed != want {
						t.Fatalf("key %q call %d: %+v; want Allowed %v", key, j, r, want)
					}
				}
			}
			if len(masters) < 2 {
				t.Errorf("the keys fell on %d master(s); want them spread", len(masters))
			}
		})
	}
}

// A request the quorum admitted is charged on the node that refused it,
// up to an empty limit, so that every node counts every admission.
func TestQuorumCharge(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srvs := redistest.StartN(t, 3)
			nodes := nodesFor(t, client, srvs)
			limit := ratelimit.Limit{Rate: 3, Per: time.Hour} // 20 min each, a burst of 3
			lim := newLimiter(t, nodes, limit, slowMachine)
			ctx := t.Context()
			one := newLimiter(t, nodes[2:], limit)
			r, err := one.AllowN(ctx, "charge", 2) // node 2: one left
			require.NoError(t, err)
			require.True(t, r.Allowed)
			r, err = lim.AllowN(ctx, "charge", 2)
			require.NoError(t, err)
			if !r.Allowed || r.Remaining != 1 {
				t.Fatalf("AllowN(2) with nodes 0 and 1 full: %+v; want admitted, 1 left", r)
			}
			// Node 2 refused it and is charged, to empty (its 40 min of
			// TAT become 60), not past it.
			deadline := time.Now().Add(2 * time.Second)
			for {
				ms, _ := strconv.Atoi(srvs[2].MustDo(t, "PTTL", ratelimit.KeyOf("charge")))
				if ms > 55*60*1000 && ms <= 60*60*1000 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 2's key has %d ms left; want the charge to bring it to ~60 min", ms)
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, s := range srvs[:2] {
				ms, _ := strconv.Atoi(s.MustDo(t, "PTTL", ratelimit.KeyOf("charge")))
				if ms <= 35*60*1000 || ms > 40*60*1000 {
					t.Errorf("%s: %d ms left; want its own admission's 40 min", s.Addr(), ms)
				}
			}
		})
	}
}
