package election_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// benchTTL is the lease TTL of the handoff benchmarks: a dead leader
// holds the office this long. Long enough for the quorum's default node
// timeout (max(50ms, TTL/50)) to stay below half of it.
const benchTTL = 500 * time.Millisecond

// BenchmarkHandoff measures how long an office stays without a leader
// when its leader goes, with a candidate waiting and an observer
// following, for each strategy (one server; five nodes) and client:
//
//   - resign: from the call to Resign to the successor's Campaign
//     returning (elected-p50-us) and to the observer delivering it
//     (observed-p50-us); ns/op is the mean until both have happened.
//   - kill: the leader stops renewing without resigning (a lease of
//     benchTTL left unrenewed, as a leader that died just after its
//     election leaves it); the figures count from the end of that lease,
//     as the leader saw it granted (Acquire returned, plus benchTTL):
//     past-expiry-p50-us to election, observed-p50-us to the observer;
//     ns/op is the mean from the leader's grant until both have
//     happened: about benchTTL.
//
// go test ./election -run '^$' -bench Handoff -benchtime 20x
func BenchmarkHandoff(b *testing.B) {
	for _, strategy := range []string{strategySingle, strategyQuorum} {
		n := 1
		if strategy == strategyQuorum {
			n = 5
		}
		srvs := redistest.StartN(b, n)
		for _, client := range redistest.Clients {
			e := &env{strategy: strategy, client: client, srvs: srvs}
			b.Run(strategy+"/"+client+"/resign", func(b *testing.B) { benchResign(b, e) })
			b.Run(strategy+"/"+client+"/kill", func(b *testing.B) { benchKill(b, e) })
		}
	}
}

// benchLocker is a Locker with the strategy's default timeouts: the
// quorum's node timeout is not the tests' longer one.
func (e *env) benchLocker(b *testing.B) locker {
	b.Helper()
	var addrs []string
	for _, s := range e.srvs {
		addrs = append(addrs, s.Addr())
	}
	nodes := nodesFor(b, e.client, addrs)
	var (
		lk  locker
		err error
	)
	if e.strategy == strategySingle {
		lk, err = single.New(nodes[0], option.TTL(benchTTL))
	} else {
		lk, err = quorum.New(nodes, option.DurableNodes(true), option.TTL(benchTTL))
	}
	require.NoError(b, err)
	b.Cleanup(func() { _ = lk.Close() })
	redistest.Warm(b, lk)
	return lk
}

type benchSet struct {
	name         string
	leader, next *election.Election
	obs          <-chan election.Leader
}

func (e *env) benchSet(b *testing.B, what string) benchSet {
	name := fmt.Sprintf("bench-%s-%s-%d", what, e.client, b.N)
	s := benchSet{name: name,
		leader: newElection(b, e.benchLocker(b), name),
		next:   newElection(b, e.benchLocker(b), name)}
	s.obs = observe(b, newElection(b, e.benchLocker(b), name))
	if l := next(b, s.obs); l != (election.Leader{}) {
		b.Fatalf("office %s held at the start: %+v", name, l)
	}
	return s
}

// successor starts the next candidate's campaign and waits until it
// queues; the returned channel delivers its term and the time it came.
func (s benchSet) successor(b *testing.B, e *env) <-chan timedTerm {
	out := make(chan timedTerm, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		term, err := s.next.Campaign(ctx, "next")
		out <- timedTerm{term, time.Now(), err}
	}()
	e.waitQueued(b, s.next.Key(), 1)
	return out
}

type timedTerm struct {
	term *election.Term
	at   time.Time
	err  error
}

// awaitNext waits for the successor's election and for the observer to
// deliver it; it returns both times.
func (s benchSet) awaitNext(b *testing.B, c <-chan timedTerm) (*election.Term, time.Time, time.Time) {
	var observed time.Time
	for {
		l := next(b, s.obs)
		if l.Value == "next" {
			observed = time.Now()
			break
		}
	}
	r := <-c
	require.NoError(b, r.err, "successor's Campaign")
	return r.term, r.at, observed
}

// settle resigns term and waits for the observer to see the office
// vacant, so the next round starts from the same state.
func (s benchSet) settle(b *testing.B, term *election.Term) {
	require.NoError(b, term.Resign(context.Background()))
	for next(b, s.obs) != (election.Leader{}) {
	}
}

func benchResign(b *testing.B, e *env) {
	s := e.benchSet(b, "resign")
	var elected, observed []time.Duration
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		leader := campaign(b, s.leader, "leader")
		nextLeader(b, s.obs, "leader")
		c := s.successor(b, e)
		b.StartTimer()
		start := time.Now()
		require.NoError(b, leader.Resign(context.Background()))
		term, at, seen := s.awaitNext(b, c)
		b.StopTimer()
		elected = append(elected, at.Sub(start))
		observed = append(observed, seen.Sub(start))
		s.settle(b, term)
	}
	b.ReportMetric(p50us(elected), "elected-p50-us")
	b.ReportMetric(p50us(observed), "observed-p50-us")
}

func benchKill(b *testing.B, e *env) {
	s := e.benchSet(b, "kill")
	lk := e.benchLocker(b)
	var past, observed []time.Duration
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		// The leader's lease, taken as Campaign takes it but never
		// renewed: it dies on the servers benchTTL after its grant.
		dead, err := lk.Acquire(context.Background(), s.leader.Key(), option.Metadata("leader"), option.TTL(benchTTL))
		require.NoError(b, err)
		granted := time.Now()
		b.StartTimer()
		c := s.successor(b, e)
		term, at, seen := s.awaitNext(b, c)
		b.StopTimer()
		expiry := granted.Add(benchTTL)
		past = append(past, at.Sub(expiry))
		observed = append(observed, seen.Sub(expiry))
		if dead.Err() == nil {
			b.Fatal("the dead leader's lease still valid after its successor's election")
		}
		// A quorum node may still hold it for a moment (its vote landed
		// later than on the majority that let it go): clear it.
		_ = dead.Release(context.Background())
		s.settle(b, term)
	}
	b.ReportMetric(p50us(past), "past-expiry-p50-us")
	b.ReportMetric(p50us(observed), "observed-p50-us")
}

// p50us returns the median of ds in µs.
func p50us(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Microsecond)
}
