package otelmetric_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/observe/otelmetric"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// metrics reads what a ManualReader has recorded.
type metrics struct {
	t  *testing.T
	r  *sdkmetric.ManualReader
	rm metricdata.ResourceMetrics
}

func newMetrics(t *testing.T) (*metrics, observe.Observer) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := otelmetric.New(mp)
	require.NoError(t, err)
	return &metrics{t: t, r: r}, obs
}

func (m *metrics) collect() {
	m.t.Helper()
	require.NoError(m.t, m.r.Collect(m.t.Context(), &m.rm))
}

func (m *metrics) find(name string) metricdata.Aggregation {
	for _, sm := range m.rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == name {
				return mt.Data
			}
		}
	}
	return nil
}

// matches reports whether set holds every one of kvs.
func matches(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum is the total of the int64 sum name over the data points that carry
// every one of kvs, as of the last collect.
func (m *metrics) sum(name string, kvs ...attribute.KeyValue) int64 {
	m.t.Helper()
	var n int64
	switch d := m.find(name).(type) {
	case nil:
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, kvs) {
				n += p.Value
			}
		}
	default:
		m.t.Fatalf("%s is a %T; want an int64 sum", name, d)
	}
	return n
}

// count is the number of values the histogram name recorded with every one
// of kvs, as of the last collect.
func (m *metrics) count(name string, kvs ...attribute.KeyValue) uint64 {
	m.t.Helper()
	var n uint64
	switch d := m.find(name).(type) {
	case nil:
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, kvs) {
				n += p.Count
			}
		}
	default:
		m.t.Fatalf("%s is a %T; want a float64 histogram", name, d)
	}
	return n
}

func (m *metrics) want(name string, want int64, kvs ...attribute.KeyValue) {
	m.t.Helper()
	if got := m.sum(name, kvs...); got != want {
		m.t.Errorf("%s%v = %d; want %d", name, kvs, got, want)
	}
}

var (
	acquired = otelmetric.KeyOutcome.String("acquired")
	taken    = otelmetric.KeyOutcome.String("taken")
	ok       = otelmetric.KeyResult.String("ok")
	failed   = otelmetric.KeyResult.String("failed")
	expired  = otelmetric.KeyCause.String("expired")
	lost     = otelmetric.KeyCause.String("lost")
)

// locker is what scenario needs of either strategy.
type locker interface {
	Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
}

// scenario runs the same story on either strategy: acquired, taken,
// released (then released again, which counts no release), expired (then
// released too late, which counts no release either), and lost to a refused
// renewal after takeAway removed the lock behind the lease's back. It
// checks every instrument but dlock.votes.
func scenario(t *testing.T, m *metrics, lk locker, strategy string, ttl time.Duration, takeAway func(key string)) {
	ctx := t.Context()
	st := otelmetric.KeyStrategy.String(strategy)

	a, err := lk.Acquire(ctx, "k")
	require.NoError(t, err)
	if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("TryAcquire of a held lock: %v; want ErrTaken", err)
	}
	m.collect()
	m.want("dlock.leases.held", 1, st)
	m.want("dlock.acquisitions", 1, st, acquired)
	m.want("dlock.acquisitions", 1, st, taken)
	require.NoError(t, a.Release(ctx))
	if err := a.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second Release: %v; want ErrNotHeld", err)
	}

	b, err := lk.TryAcquire(ctx, "k", option.TTL(ttl))
	require.NoError(t, err)
	<-b.Done()
	time.Sleep(50 * time.Millisecond) // past the servers' end of the lease too
	if err := b.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release of an expired lease: %v; want ErrNotHeld", err)
	}

	c, err := lk.Acquire(ctx, "k2", option.TTL(ttl), option.AutoRenew(true))
	require.NoError(t, err)
	takeAway("k2")
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease still alive 5s after its lock was taken away")
	}
	if err := c.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("lease ended with %v; want ErrLost", err)
	}
	_ = c.Release(ctx)
	time.Sleep(10 * time.Millisecond) // the renewal goroutine reports after the loss

	m.collect()
	m.want("dlock.acquisitions", 3, st, acquired)
	m.want("dlock.acquisitions", 1, st, taken)
	m.want("dlock.acquisitions", 4, st)
	if got := m.count("dlock.acquire.duration", st); got != 4 {
		t.Errorf("dlock.acquire.duration count = %d; want 4", got)
	}
	if got := m.count("dlock.acquire.duration", st, taken); got != 1 {
		t.Errorf("dlock.acquire.duration{taken} count = %d; want 1", got)
	}
	// Releases of leases that had already ended (released, expired or
	// lost) end nothing: the end was counted, the release is not.
	m.want("dlock.releases", 1, st, ok)
	m.want("dlock.releases", 0, st, failed)
	m.want("dlock.leases.lost", 1, st, expired)
	m.want("dlock.leases.lost", 1, st, lost)
	m.want("dlock.leases.held", 0, st)
	if got := m.sum("dlock.renewals", st, failed); got < 1 {
		t.Errorf("dlock.renewals{failed} = %d; want at least 1", got)
	}
}

func TestSingle(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			m, obs := newMetrics(t)
			lk, err := single.New(redistest.NodeFor(t, client, srv.Addr()), option.Observer(obs))
			require.NoError(t, err)
			scenario(t, m, lk, "single", 300*time.Millisecond, func(key string) {
				_, err := srv.Do(redistest.FreeArgs("dlock:{" + key + "}")...)
				require.NoError(t, err)
			})
			m.want("dlock.votes", 0)
		})
	}
}

func TestNilProvider(t *testing.T) {
	if _, err := otelmetric.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil) error = %v; want ErrInvalid", err)
	}
}

func TestQuorum(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srvs := redistest.StartN(t, 3)
			nodes := make([]node.Node, len(srvs))
			for i, s := range srvs {
				nodes[i] = redistest.NodeFor(t, client, s.Addr())
			}
			m, obs := newMetrics(t)
			// Durable nodes: fresh servers vote at once, no sit-out.
			lk, err := quorum.New(nodes, option.DurableNodes(true), option.Observer(obs))
			require.NoError(t, err)
			defer lk.Close()
			scenario(t, m, lk, "quorum", time.Second, func(key string) {
				for _, s := range srvs {
					_, err := s.Do("DEL", "dlock:{"+key+"}:lock")
					require.NoError(t, err)
				}
			})
			// Each of the three grants had at least a quorum of "ok" votes,
			// the refusal at least a quorum of "taken"; a vote that came
			// after the decision is not reported.
			okVotes := otelmetric.KeyOutcome.String("ok")
			if got := m.sum("dlock.votes", okVotes); got < 3*2 {
				t.Errorf("dlock.votes{ok} = %d; want at least 6", got)
			}
			if got := m.sum("dlock.votes", taken); got < 2 {
				t.Errorf("dlock.votes{taken} = %d; want at least 2", got)
			}
			var perNode int64
			for _, s := range srvs {
				perNode += m.sum("dlock.votes", otelmetric.KeyNode.String(s.Addr()))
			}
			if all := m.sum("dlock.votes"); perNode != all || all == 0 {
				t.Errorf("votes on the three nodes' names = %d of %d; want all, and some", perNode, all)
			}
		})
	}
}

// TestPrimitives: permits, the read-write lock and the work queue report
// to an Observer (option.Observer), and their events reach the metrics
// under their own dlock.strategy, beside the locks': a grant, a refusal
// (a full semaphore, a held write lock, an empty queue) and a release each.
func TestPrimitives(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	m, obs := newMetrics(t)
	ctx := t.Context()

	sem, err := permits.New(n, option.Observer(obs))
	require.NoError(t, err)
	p, err := sem.TryAcquire(ctx, "pool", 1)
	require.NoError(t, err)
	_, err = sem.TryAcquire(ctx, "pool", 1)
	require.ErrorIs(t, err, lease.ErrTaken)
	require.NoError(t, p.Release(ctx))

	rw, err := rwlock.New(n, option.Observer(obs))
	require.NoError(t, err)
	w, err := rw.TryAcquire(ctx, "doc")
	require.NoError(t, err)
	_, err = rw.TryAcquireShared(ctx, "doc")
	require.ErrorIs(t, err, lease.ErrTaken)
	require.NoError(t, w.Release(ctx))

	q, err := claims.New(n, "jobs", option.Observer(obs))
	require.NoError(t, err)
	require.NoError(t, q.Add(ctx, "job-1"))
	c, err := q.Claim(ctx)
	require.NoError(t, err)
	_, err = q.Claim(ctx)
	require.ErrorIs(t, err, claims.ErrEmpty)
	require.NoError(t, c.Complete(ctx))

	lk, err := single.New(n, option.TTL(300*time.Millisecond))
	require.NoError(t, err)
	defer lk.Close()
	el, err := election.New(lk, "office", option.Observer(obs))
	require.NoError(t, err)
	term, err := el.Campaign(ctx, "a")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = el.Campaign(short, "b")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, term.Resign(ctx))
	// A term whose lock is taken away ends lost.
	gone, err := el.Campaign(ctx, "c")
	require.NoError(t, err)
	_, err = srv.Do(redistest.FreeArgs("dlock:{" + election.KeyPrefix + "office}")...)
	require.NoError(t, err)
	select {
	case <-gone.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a term whose lock was taken away still lasts")
	}
	_ = gone.Resign(ctx) // ends its goroutine; the lost lease may still release cleanly

	m.collect()
	el1 := otelmetric.KeyStrategy.String("election")
	m.want("dlock.acquisitions", 2, el1, acquired)
	// A wait that ran out on a held office matches ErrTaken (and the
	// context's error): taken, as for any Acquire.
	m.want("dlock.acquisitions", 1, el1, taken)
	m.want("dlock.releases", 1, el1, ok)
	m.want("dlock.leases.lost", 1, el1, lost)
	m.want("dlock.leases.held", 0, el1)
	for _, s := range []string{"permits", "rwlock", "claims"} {
		st := otelmetric.KeyStrategy.String(s)
		m.want("dlock.acquisitions", 1, st, acquired)
		m.want("dlock.acquisitions", 1, st, taken)
		m.want("dlock.releases", 1, st, ok)
		m.want("dlock.leases.held", 0, st)
		if got := m.count("dlock.acquire.duration", st); got != 2 {
			t.Errorf("dlock.acquire.duration{%s} count = %d; want 2", s, got)
		}
	}
}

// TestMasterChanges: a Locker that follows a master through its Sentinels
// counts the failover it followed, a real promotion, under the new
// master's address, and no change before it.
func TestMasterChanges(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			g := redistest.StartSentinels(t, 3)
			m, obs := newMetrics(t)
			lk, err := dlock.Open(ctx, dlock.Config{SentinelMaster: g.Name, Addrs: g.Addrs(), Client: client,
				DialTimeout: 500 * time.Millisecond, Observer: obs})
			require.NoError(t, err)
			defer lk.Close()
			l, err := lk.TryAcquire(ctx, "before")
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
			m.collect()
			m.want("dlock.master.changes", 0)

			g.Master.Kill()
			require.NoError(t, g.WaitPromoted(ctx))
			// The client learns of the new master a moment after the
			// Sentinels agree: calls may fail until then.
			for {
				l, err = lk.TryAcquire(ctx, "after")
				if err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			require.NoError(t, err, "TryAcquire on the promoted replica")
			require.NoError(t, l.Release(ctx))
			m.collect()
			m.want("dlock.master.changes", 1, otelmetric.KeyNode.String(g.Replica.Addr()))
			m.want("dlock.master.changes", 1)
		})
	}
}

// TestBreaks: an operator's break is counted by strategy and result, on
// either strategy.
func TestBreaks(t *testing.T) {
	ctx := t.Context()
	m, obs := newMetrics(t)
	srvs := redistest.StartN(t, 3)
	nodes := make([]node.Node, len(srvs))
	for i, s := range srvs {
		nodes[i] = redistest.NodeFor(t, redistest.OpenClients[i%2], s.Addr())
	}
	sl, err := single.New(nodes[0], option.Observer(obs))
	require.NoError(t, err)
	ql, err := quorum.New(nodes, option.DurableNodes(true), option.Observer(obs))
	require.NoError(t, err)
	defer ql.Close()
	for _, lk := range []interface {
		dlock.Locker
		ForceRelease(ctx context.Context, key string) (lease.Broken, error)
	}{sl, ql} {
		l, err := lk.TryAcquire(ctx, "b")
		require.NoError(t, err)
		br, err := lk.ForceRelease(ctx, "b")
		require.NoError(t, err)
		require.True(t, br.Held && br.Token > l.Token(), "Broken %+v", br)
	}
	srvs[0].Kill()
	_, err = sl.ForceRelease(ctx, "b")
	require.Error(t, err, "a break on a stopped server")
	m.collect()
	m.want("dlock.breaks", 1, otelmetric.KeyStrategy.String("single"), otelmetric.KeyResult.String("ok"))
	m.want("dlock.breaks", 1, otelmetric.KeyStrategy.String("single"), otelmetric.KeyResult.String("failed"))
	m.want("dlock.breaks", 1, otelmetric.KeyStrategy.String("quorum"), otelmetric.KeyResult.String("ok"))
}

// TestRateDecisions: rate limit calls are counted by outcome, a Wait once.
func TestRateDecisions(t *testing.T) {
	ctx := t.Context()
	m, obs := newMetrics(t)
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	lim, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 20, Per: time.Second, Burst: 1}, option.Observer(obs))
	require.NoError(t, err)
	defer lim.Close()
	for range 2 {
		_, err := lim.Allow(ctx, "r")
		require.NoError(t, err)
	}
	_, err = lim.Wait(ctx, "r")
	require.NoError(t, err)
	_, err = lim.AllowN(ctx, "r", 2)
	require.ErrorIs(t, err, lease.ErrInvalid)
	m.collect()
	rate := otelmetric.KeyStrategy.String("ratelimit")
	m.want("dlock.rate.decisions", 2, rate, otelmetric.KeyOutcome.String("allowed"))
	m.want("dlock.rate.decisions", 1, rate, otelmetric.KeyOutcome.String("refused"))
	m.want("dlock.rate.decisions", 1, rate, otelmetric.KeyOutcome.String("invalid"))
	m.want("dlock.rate.decisions", 4)
}
