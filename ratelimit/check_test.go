package ratelimit_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/ratelimit"
)

// checker records the admissions of a run, by the local clock of the
// test (the servers run on the same host, so TIME reads the same clock),
// and the faults of its nodes, and judges each sliding window against the
// bound of the package doc: a request admitted by a call that ran from s
// to e was admitted on at least majority nodes at server times in [s, e],
// so the admissions whose calls ended in a window, the earliest starting
// at a and the latest ending at b, number at most
//
//	⌊Σ_j (burst × (1 + losses_j) + ⌊(b − a)/interval⌋) / majority⌋
//
// the sum over the nodes not down during all of [a, b], losses_j the
// data-losing kills of node j during [a, b].
type checker struct {
	interval time.Duration
	burst    int
	nodes    int
	majority int

	mu     sync.Mutex
	adm    []admission
	losses [][]span // by node: each Kill, from before it to after it
	down   [][]span // by node: from after a Kill to before the Restart
	paused []span   // any node's SIGSTOP to SIGCONT, for the report
	outage []span   // when no majority could admit, for the under-admission check
	calls  int
	errs   int
}

type span struct{ from, to time.Time }

func (s span) overlaps(a, b time.Time) bool { return !s.to.Before(a) && !s.from.After(b) }

type admission struct {
	start, end time.Time
	n          int
}

func newChecker(l ratelimit.Limit, nodes, majority int) *checker {
	return &checker{
		interval: ratelimit.Interval(l), burst: l.Burst, nodes: nodes, majority: majority,
		losses: make([][]span, nodes), down: make([][]span, nodes),
	}
}

// call records the outcome of one call that ran from start to now.
func (c *checker) call(start time.Time, n int, r ratelimit.Result, err error) {
	end := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if err != nil {
		c.errs++
	}
	if err == nil && r.Allowed {
		c.adm = append(c.adm, admission{start, end, n})
	}
}

// killBetween kills the servers of the nodes idx (they lose their data)
// at from after start, and restarts them, empty, at to; it reports false,
// having done nothing, when ctx ended before from.
func (c *checker) killBetween(ctx context.Context, start time.Time, from, to time.Duration, srvs []*redistest.Server, idx ...int) bool {
	if !until(ctx, start, from) {
		return false
	}
	killed := make([]time.Time, len(idx))
	for i, j := range idx {
		before := time.Now()
		srvs[j].Kill()
		killed[i] = time.Now()
		c.mu.Lock()
		c.losses[j] = append(c.losses[j], span{before, killed[i]})
		c.mu.Unlock()
	}
	until(ctx, start, to)
	for i, j := range idx {
		c.mu.Lock()
		c.down[j] = append(c.down[j], span{killed[i], time.Now()})
		c.mu.Unlock()
		srvs[j].Restart()
	}
	return true
}

// pauseBetween stops srv at from after start and resumes it at to; it
// reports false, having done nothing, when ctx ended before from.
func (c *checker) pauseBetween(ctx context.Context, start time.Time, from, to time.Duration, srv *redistest.Server) bool {
	if !until(ctx, start, from) {
		return false
	}
	paused := time.Now()
	srv.Pause()
	until(ctx, start, to)
	srv.Resume()
	c.mu.Lock()
	c.paused = append(c.paused, span{paused, time.Now()})
	c.mu.Unlock()
	return true
}

// report is what judge found.
type report struct {
	windows, judged, violations int
	faulty                      int     // judged windows with a fault in them
	worst                       float64 // the largest admissions/bound of a window
	worstSingle                 float64 // the largest admissions/(burst + span/interval)
	worstHealthy                float64 // the same, of the windows without a fault
	first                       string  // the first violation, in words
	admitted                    int
}

// slack widens each window's span for the difference between the wall
// clock the servers read and the one the test's timestamps carry.
const slack = 2 * time.Millisecond

// judge slides a window of width over [from, to) by step and judges each
// window that holds an admission.
func (c *checker) judge(from, to time.Time, width, step time.Duration) report {
	c.mu.Lock()
	defer c.mu.Unlock()
	adm := slices.Clone(c.adm)
	slices.SortFunc(adm, func(x, y admission) int { return x.end.Compare(y.end) })
	var rep report
	for _, a := range adm {
		rep.admitted += a.n
	}
	lo := 0
	for t := from; !t.Add(width).After(to); t = t.Add(step) {
		rep.windows++
		for lo < len(adm) && adm[lo].end.Before(t) {
			lo++
		}
		count, a, b := 0, time.Time{}, time.Time{}
		for i := lo; i < len(adm) && adm[i].end.Before(t.Add(width)); i++ {
			count += adm[i].n
			if a.IsZero() || adm[i].start.Before(a) {
				a = adm[i].start
			}
			b = adm[i].end
		}
		if count == 0 {
			continue
		}
		rep.judged++
		perNode := c.burst + int((b.Sub(a)+slack)/c.interval)
		sum, faulty := 0, false
		for j := range c.nodes {
			if c.downAll(j, a, b) {
				faulty = true
				continue
			}
			sum += perNode
			for _, l := range c.losses[j] {
				if l.overlaps(a, b) {
					sum += c.burst
					faulty = true
				}
			}
			for _, d := range c.down[j] {
				faulty = faulty || d.overlaps(a, b)
			}
		}
		for _, p := range c.paused {
			faulty = faulty || p.overlaps(a, b)
		}
		if faulty {
			rep.faulty++
		} else {
			rep.worstHealthy = math.Max(rep.worstHealthy, float64(count)/float64(perNode))
		}
		bound := sum / c.majority
		rep.worst = math.Max(rep.worst, float64(count)/float64(max(bound, 1)))
		rep.worstSingle = math.Max(rep.worstSingle, float64(count)/float64(perNode))
		if count > bound {
			rep.violations++
			if rep.first == "" {
				rep.first = fmt.Sprintf("%d admitted in a window of %v (from %v); bound %d",
					count, b.Sub(a).Round(time.Millisecond), a.Sub(from).Round(time.Millisecond), bound)
			}
		}
	}
	return rep
}

// downAll reports whether node j was down during all of [a, b].
func (c *checker) downAll(j int, a, b time.Time) bool {
	for _, d := range c.down[j] {
		if !d.from.After(a) && !d.to.Before(b) {
			return true
		}
	}
	return false
}

// outageOf returns how long no majority could admit, between from and to.
func (c *checker) outageOf(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var d time.Duration
	for _, o := range c.outage {
		lo, hi := o.from, o.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		d += max(hi.Sub(lo), 0)
	}
	return d
}

// allower is what the workload calls: a Limiter, or a stand-in.
type allower interface {
	Allow(ctx context.Context, key string) (ratelimit.Result, error)
	Wait(ctx context.Context, key string) (ratelimit.Result, error)
}

// load runs workers goroutines calling Allow (every few ms) and as many
// calling Wait (each bounded by 100 ms) on key until ctx ends, recording
// every outcome in c.
func load(ctx context.Context, lim allower, key string, workers int, c *checker) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 200*time.Millisecond)
				r, err := lim.Allow(cctx, key)
				cancel()
				c.call(start, 1, r, err)
				time.Sleep(4 * time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
				r, err := lim.Wait(wctx, key)
				cancel()
				c.call(start, 1, r, err)
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// checkRun judges a run from start to end, logs how much it judged, and
// fails t on a violation; it also fails t when the run admitted less than
// under × the most the limit allows outside the outages.
func checkRun(t *testing.T, c *checker, l ratelimit.Limit, start, end time.Time, under float64) report {
	t.Helper()
	const width, step = 500 * time.Millisecond, 10 * time.Millisecond
	rep := c.judge(start, end, width, step)
	c.mu.Lock()
	calls, errs := c.calls, c.errs
	c.mu.Unlock()
	t.Logf("%d calls (%d errors), %d admitted; windows of %v judged %d/%d (%d with a fault), violations %d; worst admitted/bound %.2f; admitted/single-server bound: worst %.2f, worst without a fault %.2f",
		calls, errs, rep.admitted, width, rep.judged, rep.windows, rep.faulty, rep.violations, rep.worst, rep.worstSingle, rep.worstHealthy)
	if rep.violations > 0 {
		t.Errorf("over-admission: %d windows over the bound, the first: %s", rep.violations, rep.first)
	}
	if rep.judged < rep.windows/2 {
		t.Errorf("judged %d of %d windows; want most", rep.judged, rep.windows)
	}
	if under > 0 {
		live := end.Sub(start) - c.outageOf(start, end)
		ideal := float64(l.Burst) + float64(live)/float64(ratelimit.Interval(l))
		t.Logf("admitted %d of the ideal %.0f (%.0f%%)", rep.admitted, ideal, 100*float64(rep.admitted)/ideal)
		if float64(rep.admitted) < under*ideal {
			t.Errorf("under-admission: %d admitted; want at least %.0f%% of %.0f", rep.admitted, 100*under, ideal)
		}
	}
	return rep
}

// run runs the workload (load) on key for d, and faults, when given,
// beside it, told the run's context and start; it returns when both
// ended, with the run's start and end.
func (c *checker) run(t *testing.T, lim allower, key string, d time.Duration, faults func(ctx context.Context, start time.Time)) (start, end time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start = time.Now()
	var wg sync.WaitGroup
	if faults != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			faults(ctx, start)
		}()
	}
	load(ctx, lim, key, 4, c)
	wg.Wait()
	return start, time.Now()
}

// until sleeps until d after start and reports whether ctx is still live.
func until(ctx context.Context, start time.Time, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(start.Add(d))):
		return true
	}
}

var checkLimit = ratelimit.Limit{Rate: 50, Per: time.Second, Burst: 10}

// TestCheckSingle: one server, many callers, a healthy stretch, then a
// restart without the data (the key lost: one more burst) and a pause.
func TestCheckSingle(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			lim := newLimiter(t, []node.Node{redistest.NodeFor(t, client, srv.Addr())}, checkLimit)
			c := newChecker(lim.Limit(), 1, 1)
			start, end := c.run(t, lim, "single", 2500*time.Millisecond, func(ctx context.Context, start time.Time) {
				srvs := []*redistest.Server{srv}
				_ = c.killBetween(ctx, start, 1000*time.Millisecond, 1200*time.Millisecond, srvs, 0) &&
					c.pauseBetween(ctx, start, 1600*time.Millisecond, 1900*time.Millisecond, srv)
			})
			c.outage = append(c.outage, c.down[0]...)
			c.outage = append(c.outage, c.paused...)
			checkRun(t, c, lim.Limit(), start, end, 0.75)
		})
	}
}

// TestCheckQuorum: five independent masters, many callers, healthy, then
// with a run of faults on minorities: a kill, a restart without data, a
// pause, two nodes killed at once and restarted empty.
func TestCheckQuorum(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			nodes := nodesFor(t, client, srvs)
			lim := newLimiter(t, nodes, checkLimit)
			// Healthy first: the bound, and at least 80% of the ideal.
			healthy := newChecker(lim.Limit(), len(nodes), lim.Majority())
			start, end := healthy.run(t, lim, "healthy-"+client, 1500*time.Millisecond, nil)
			checkRun(t, healthy, lim.Limit(), start, end, 0.8)

			c := newChecker(lim.Limit(), len(nodes), lim.Majority())
			start, end = c.run(t, lim, "quorum-"+client, 3500*time.Millisecond, func(ctx context.Context, start time.Time) {
				ms := time.Millisecond
				_ = c.killBetween(ctx, start, 700*ms, 1300*ms, srvs, 0) &&
					c.pauseBetween(ctx, start, 1600*ms, 2100*ms, srvs[1]) &&
					c.killBetween(ctx, start, 2300*ms, 2900*ms, srvs, 2, 3)
			})
			// Loosely: with nodes down the live ones must agree more often
			// (all three while two are down), and near the limit they
			// disagree: 66-89% of the ideal measured, the least while
			// only three were up.
			checkRun(t, c, lim.Limit(), start, end, 0.5)
		})
	}
}

// spread is a broken quorum: it sends each call to one node in turn, as
// if one node's yes were a majority. The checker must catch it.
type spread struct {
	mu   sync.Mutex
	next int
	lims []*ratelimit.Limiter
}

func (s *spread) pick() *ratelimit.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.lims[s.next%len(s.lims)]
}

func (s *spread) Allow(ctx context.Context, key string) (ratelimit.Result, error) {
	return s.pick().Allow(ctx, key)
}

func (s *spread) Wait(ctx context.Context, key string) (ratelimit.Result, error) {
	return s.pick().Wait(ctx, key)
}

// TestCheckCatchesOverAdmission: the checker fails a limiter that admits
// more than the bound allows.
func TestCheckCatchesOverAdmission(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	s := &spread{}
	for _, srv := range srvs {
		s.lims = append(s.lims, newLimiter(t, []node.Node{redistest.NodeFor(t, "go-redis", srv.Addr())}, checkLimit))
	}
	c := newChecker(s.lims[0].Limit(), len(srvs), len(srvs)/2+1)
	start, end := c.run(t, s, "spread", 1500*time.Millisecond, nil)
	rep := c.judge(start, end, 500*time.Millisecond, 10*time.Millisecond)
	t.Logf("broken quorum: %d admitted; %d of %d judged windows over the bound (worst admitted/bound %.2f); the first: %s",
		rep.admitted, rep.violations, rep.judged, rep.worst, rep.first)
	require.Positive(t, rep.judged, "windows judged")
	if rep.violations == 0 {
		t.Errorf("the checker passed a quorum that admits on one node's yes")
	}
}
