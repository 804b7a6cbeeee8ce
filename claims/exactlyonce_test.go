package claims_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// The property: every item added is completed exactly once, by the holder
// of its latest token, while workers are killed (they stop without
// completing or releasing, mid-claim or holding an item) and paused (past
// their lease, then they try to Complete), and, in TestExactlyOnceRestart,
// while the server is killed and restarted from its AOF.

// chaos is one randomized run: its queue, its budget of faults, and the
// history its workers record.
type chaos struct {
	t       *testing.T
	srv     *redistest.Server // for diagnostics; may be nil
	q       *claims.Queue
	ttl     time.Duration
	items   int
	workers int
	seed    uint64
	// serverFaults: the server is restarted, and may refuse a claim while
	// it loads its data (LOADING); workers claim again.
	serverFaults bool
	// Calls that failed other than by a refusal, and were made again: a
	// restart, or, with valkey-go, another call's deadline (a worker
	// killed mid-claim) failing the calls it shared a connection with.
	transient atomic.Int32

	// Faults left to inject, and how many were.
	kills, midKills, pauses atomic.Int32
	killed, midKilled       atomic.Int32
	paused, pausedAccepted  atomic.Int32
	retried                 atomic.Int32
	workerSeq               atomic.Uint64

	// The producer's last failed Stats, for a run that times out.
	statsErr atomic.Value

	mu       sync.Mutex
	issued   map[string][]fence.Token // tokens of the claims workers got
	accepted map[string][]fence.Token // tokens of the Completes accepted
	refused  []refusedComplete
	done     chan struct{} // closed once every item was completed
}

type refusedComplete struct {
	id    string
	token fence.Token
	err   error
}

func newChaos(t *testing.T, q *claims.Queue) *chaos {
	c := &chaos{t: t, q: q, ttl: 150 * time.Millisecond, items: 300, workers: 8,
		seed:   seed(t),
		issued: map[string][]fence.Token{}, accepted: map[string][]fence.Token{}, done: make(chan struct{})}
	c.kills.Store(20)
	c.midKills.Store(20)
	c.pauses.Store(25)
	return c
}

// seed returns the run's random seed: CLAIMS_SEED when set (to run a
// failed run's faults again), else a fresh one.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("CLAIMS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CLAIMS_SEED")
		return v
	}
	return rand.Uint64()
}

// take spends one fault of a budget; false when it is spent.
func take(budget *atomic.Int32) bool { return budget.Add(-1) >= 0 }

func (c *chaos) issue(cl *claims.Claim) {
	c.mu.Lock()
	c.issued[cl.ID()] = append(c.issued[cl.ID()], cl.Token())
	c.mu.Unlock()
}

// run adds the items from a producer, runs the workers until every item
// was completed or a minute passed, calls during (when not nil) once a
// third of the items were completed, and then checks the history.
func (c *chaos) run(during func()) {
	t := c.t
	t.Logf("seed %d (CLAIMS_SEED=%[1]d runs its faults again)", c.seed)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { c.produce(ctx) })
	for range c.workers {
		c.spawn(ctx, &wg)
	}
	if during != nil {
		for ctx.Err() == nil {
			c.mu.Lock()
			n := len(c.accepted)
			c.mu.Unlock()
			if n >= c.items/3 {
				during()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	select {
	case <-c.done:
	case <-time.After(40 * time.Second):
		c.stuck()
		<-ctx.Done()
	}
	cancel()
	wg.Wait()
	c.check()
}

// produce adds the items in small batches, while fewer than two per
// worker are pending, so that the queue stays short and an item a paused
// worker lost is claimed again soon.
func (c *chaos) produce(ctx context.Context) {
	const batch = 5
	for i := 0; i < c.items; i += batch {
		for ctx.Err() == nil {
			s, err := c.q.Stats(ctx)
			if err == nil && s.Pending < 2*c.workers {
				break
			}
			if err != nil {
				c.statsErr.Store(err.Error())
			}
			time.Sleep(2 * time.Millisecond)
		}
		var ids []string
		for j := i; j < min(i+batch, c.items); j++ {
			ids = append(ids, "item-"+strconv.Itoa(j))
		}
		if err := c.finish(func(context.Context) error { return c.q.Add(ctx, ids...) }); err != nil {
			if ctx.Err() == nil {
				c.t.Errorf("Add: %v", err)
			}
			return
		}
	}
}

func (c *chaos) spawn(ctx context.Context, wg *sync.WaitGroup) {
	id := c.workerSeq.Add(1)
	wg.Go(func() { c.work(ctx, wg, rand.New(rand.NewPCG(c.seed, id))) })
}

// work is one worker: it claims items until ctx ends, or it is killed,
// when another worker takes its place.
func (c *chaos) work(ctx context.Context, wg *sync.WaitGroup, rng *rand.Rand) {
	ttl := option.TTL(c.ttl)
	for ctx.Err() == nil {
		if rng.Float64() < 0.05 && take(&c.midKills) {
			// Killed while its claim is on its way: the claim is given up.
			c.midKilled.Add(1)
			cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
			cl, err := c.q.ClaimWait(cctx, ttl)
			cancel()
			if err == nil {
				c.issue(cl) // it got the item in time after all, and dies holding it
			}
			c.spawn(ctx, wg)
			return
		}
		cl, err := c.q.ClaimWait(ctx, ttl)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !c.serverFaults {
				c.t.Errorf("ClaimWait: %v", err)
				return
			}
			// The server's error reply (LOADING, while it reads its AOF).
			time.Sleep(20 * time.Millisecond)
			continue
		}
		c.issue(cl)
		switch p := rng.Float64(); {
		case p < 0.08 && take(&c.kills):
			// Killed holding the item: no Complete, no Release.
			c.killed.Add(1)
			c.spawn(ctx, wg)
			return
		case p < 0.16 && take(&c.pauses):
			// Paused past its lease; then it goes on as if it held it,
			// at the worst moment when it can: as soon as another worker
			// holds the item.
			c.paused.Add(1)
			time.Sleep(c.ttl + c.ttl/2)
			c.waitClaimedAgain(cl, time.Duration(rng.Int64N(int64(2*c.ttl))))
			if c.complete(cl) {
				c.pausedAccepted.Add(1)
			}
		case p < 0.21:
			c.retried.Add(1)
			c.finish(func(ctx context.Context) error { return cl.Retry(ctx) })
		default:
			time.Sleep(time.Millisecond + time.Duration(rng.IntN(4000))*time.Microsecond)
			c.complete(cl)
		}
	}
}

// waitClaimedAgain returns once a worker got a newer claim of cl's item,
// or after d.
func (c *chaos) waitClaimedAgain(cl *claims.Claim, d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		c.mu.Lock()
		newer := slices.Max(c.issued[cl.ID()]) > cl.Token()
		c.mu.Unlock()
		if newer {
			return
		}
	}
}

// finish runs f until it succeeds or is refused, for up to 30 s: a call
// that failed otherwise (a lost connection, a timeout) may or may not have
// landed, and every one of them is safe to make again. It returns f's last
// error.
func (c *chaos) finish(f func(ctx context.Context) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		// A server's error reply is final, but for LOADING: a restarted
		// server reading its AOF.
		var re *node.ReplyError
		final := errors.As(err, &re) && !strings.HasPrefix(re.Msg, "LOADING")
		if err == nil || errors.Is(err, lease.ErrNotHeld) || final || time.Now().After(deadline) {
			return err
		}
		c.transient.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// complete completes cl and records the outcome; it reports whether the
// Complete was accepted.
func (c *chaos) complete(cl *claims.Claim) bool {
	err := c.finish(cl.Complete)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.refused = append(c.refused, refusedComplete{cl.ID(), cl.Token(), err})
		return false
	}
	c.accepted[cl.ID()] = append(c.accepted[cl.ID()], cl.Token())
	if len(c.accepted) == c.items {
		close(c.done)
	}
	return true
}

// stuck logs what a run that timed out can tell: the producer's last
// failed Stats, the server's view, and every goroutine's stack.
func (c *chaos) stuck() {
	c.t.Errorf("the run timed out; the producer's last failed Stats: %v", c.statsErr.Load())
	if c.srv != nil {
		for _, cmd := range [][]string{{"PING"}, {"CLIENT", "LIST"}, {"SLOWLOG", "GET", "5"}} {
			out, err := c.srv.Do(cmd...)
			c.t.Logf("%v: %v %s", cmd, err, out)
		}
	}
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	c.t.Log(b.String())
}

func (c *chaos) check() {
	t := c.t
	c.mu.Lock()
	defer c.mu.Unlock()
	stale := 0
	for _, r := range c.refused {
		var se *fence.StaleError
		if !errors.Is(r.err, lease.ErrNotHeld) {
			t.Errorf("Complete of %s (token %d) failed: %v; want accepted or refused with ErrNotHeld", r.id, r.token, r.err)
			continue
		}
		if errors.As(r.err, &se) {
			stale++
			if se.Token != r.token || se.Highest <= r.token {
				t.Errorf("Complete of %s refused with %+v; want its token %d and a higher one", r.id, se, r.token)
			}
		}
		if got := c.accepted[r.id]; len(got) == 1 && r.token >= got[0] {
			t.Errorf("Complete of %s with token %d refused, while the accepted one carried %d", r.id, r.token, got[0])
		}
	}
	for i := range c.items {
		id := "item-" + strconv.Itoa(i)
		got, issued := c.accepted[id], c.issued[id]
		switch {
		case len(got) != 1:
			t.Errorf("%s completed %d times (tokens %v); want once", id, len(got), got)
		case got[0] != slices.Max(issued):
			// A Complete accepted from a claim older than the item's
			// latest, or a claim of the item after it was completed.
			t.Errorf("%s completed with token %d; its claims got %v: want the latest", id, got[0], issued)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(issued)))) != len(issued) {
			t.Errorf("%s: a token handed out twice: %v", id, issued)
		}
	}
	claimsMade := 0
	for _, ts := range c.issued {
		claimsMade += len(ts)
	}
	t.Logf("%d items, %d claims seen; killed holding %d, mid-claim %d; paused %d (%d of them accepted: nobody had claimed the item since); "+
		"returned %d; refused Completes %d (%d stale); calls made again after a transient failure %d",
		c.items, claimsMade, c.killed.Load(), c.midKilled.Load(), c.paused.Load(), c.pausedAccepted.Load(),
		c.retried.Load(), len(c.refused), stale, c.transient.Load())
	if t.Failed() {
		return
	}
	if c.paused.Load() > c.pausedAccepted.Load()+2 && stale == 0 {
		// Paused workers sleep 1.5 to 3.5 leases while the queue is
		// short: their items are claimed again meanwhile.
		t.Errorf("no stale Complete refused among %d paused workers", c.paused.Load())
	}
	if s := stats(t, c.q); s != (claims.Stats{}) {
		t.Errorf("after the run: %+v; want an empty queue", s)
	}
}

func TestExactlyOnce(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		c := newChaos(t, newQueue(t, n, "chaos"))
		c.srv = srv
		c.run(nil)
		wantOnlyRecords(t, srv, c.q)
	})
}

// TestExactlyOnceRestart: the same, with the server killed (SIGKILL) and
// restarted from its AOF (appendfsync always) once a third of the items
// were completed. Every write it acknowledged survives, so every promise
// holds; calls that fail while it is away are made again.
func TestExactlyOnceRestart(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithAOF())
			c := newChaos(t, newQueue(t, redistest.NodeFor(t, client, srv.Addr()), "chaos"))
			c.serverFaults = true
			c.run(func() {
				require.NoError(t, srv.StartAgain())
				t.Logf("server restarted from its AOF with %d of %d items completed", c.completed(), c.items)
			})
			wantOnlyRecords(t, srv, c.q)
		})
	}
}

func (c *chaos) completed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.accepted)
}

// wantOnlyRecords checks that q left only records that expire on srv:
// done records, token floors and gone owners.
func wantOnlyRecords(t *testing.T, srv *redistest.Server, q *claims.Queue) {
	t.Helper()
	keys, err := srv.Keys()
	require.NoError(t, err)
	base := claims.Base(q)
	for _, k := range keys {
		if k == base+":gone" || strings.HasPrefix(k, base+":done:") || strings.HasPrefix(k, base+":floor:") {
			ttl, err := srv.Do("PTTL", k)
			require.NoError(t, err)
			if ms, _ := strconv.Atoi(ttl); ms <= 0 {
				t.Errorf("%s: PTTL %s; want it to expire", k, ttl)
			}
			continue
		}
		t.Errorf("key %q left after the run", k)
	}
}
