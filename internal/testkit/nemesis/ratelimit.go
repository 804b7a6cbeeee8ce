package nemesis

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/ratelimit"
)

// rateLimits are the limits the workers call, each on a key of its own:
// one whose interval is a whole number of ms, and one whose Per the Rate
// does not divide (42857.14… µs, rounded up to 42858).
var rateLimits = []struct {
	key   string
	limit ratelimit.Limit
}{
	{"rate-a", ratelimit.Limit{Rate: 20, Per: time.Second, Burst: 5}},
	{"rate-b", ratelimit.Limit{Rate: 7, Per: 300 * time.Millisecond, Burst: 3}},
}

// The windows RATE and RATE floor slide, and the least calm a floor
// window needs to be judged. A floor window is long so that the calm
// parts between the faults of a busy schedule add up.
const (
	rateWidth  = time.Second
	rateStep   = 20 * time.Millisecond
	floorWidth = 6 * time.Second
	floorCalm  = 200 * time.Millisecond
	floorStep  = 100 * time.Millisecond
)

// RateFloor is the least share of its ideal (the calm time over the
// limit's interval) a key must admit in the calm part of a floor window:
// see safety.CheckRateFloor. The callers want about three times the
// limit. Measured under -race with both strategies at once (seeds 3, 5,
// 17): the least window admitted 55-90% on the single server, 58-82% on
// the quorum; the floor leaves a margin below that.
const RateFloor = 0.4

// rateCall bounds one Allow. floorSettle is how far past a fault's end
// the floor's disturbed stretch reaches: the calls a fault held are
// answered, or fail, as it ends, and the clients redial a restarted
// server within it (measured, seed 11: admissions in the first 100 ms
// after every fault's end). floorGap is the shortest calm the quorum's
// floor judges between two disturbed stretches. Its calm begins with a
// node still out, so a call needs every other node but one, and after a
// storm several of them were just restarted: on a loaded machine their
// clients' redials outlast floorSettle (seen in CI, the test process
// starved in 4% of the run: 316 ms between two nodes' restart and the
// next kill, with a third node still down, in which no call was admitted,
// 3 of 5 nodes failing their 112 ms node timeout), and a gap shorter than
// one call's bound can be all redial. A longer calm part pays for its
// first redials out of the rest. The single strategy's calm has its one
// server up and unfaulted: a gap there is judged.
const (
	rateCall    = 500 * time.Millisecond
	floorSettle = 100 * time.Millisecond
	floorGap    = rateCall
)

// RateStats is what the workers' rate limits did and how near their
// bounds they came.
type RateStats struct {
	Calls    int64 `json:"calls"`
	Admitted int64 `json:"admitted"`
	Refused  int64 `json:"refused"`
	Errors   int64 `json:"errors"`
	// CalmErrors are the failed calls that
	// ended outside the floor's disturbed stretches.
	CalmErrors int64 `json:"calm_errors"`
	// Worst is the largest admitted/bound of a RATE window, and
	// WorstRefill whether that window held a refill (a fault's burst).
	Worst       float64 `json:"worst_of_bound"`
	WorstRefill bool    `json:"worst_with_refill"`
	// FloorMin and FloorMean are the admitted share of the ideal over
	// the calm windows; Floor is RateFloor.
	FloorMin  float64 `json:"floor_min"`
	FloorMean float64 `json:"floor_mean"`
	Floor     float64 `json:"floor"`
	// Calm is the share of the run outside the floor's disturbed
	// stretches: the time the floor holds the limit to its share. (The
	// floor's judged share counts the windows with some calm in them.)
	Calm float64 `json:"calm"`
	// Starved is the share of the run in which the test process itself
	// was starved (a wake starveLate late or more, and floorSettle
	// after): the floor judges none of it.
	Starved float64 `json:"starved"`
}

// rateLoad is the workers' rate limit calls: each worker has one
// Limiter per limit, on clients of its own of the strategy's servers
// (the single master, or all the quorum's nodes), and a goroutine that
// calls them until the run ends.
type rateLoad struct {
	callers []*rateCaller
	plant   string // Config.Plant

	mu   sync.Mutex
	adms [][]safety.Admission // by limit
	refs [][]time.Time        // by limit: the ends of the calls refused
	errs []rateErr            // every call that failed, with its error's text from texts
	// texts holds each distinct error text once, at most maxRateErrs of
	// them: a fault repeats one text thousands of times.
	texts map[string]string

	calls, admitted, refused, failed atomic.Int64
}

// rateErr is a call that failed: when it ended, on which caller, and why
// (empty once maxRateErrs distinct texts are kept).
type rateErr struct {
	at     time.Time
	caller int
	err    string
}

// maxRateErrs bounds the distinct error texts kept; a failure with a
// text past them keeps its time and caller, which the findings count.
const maxRateErrs = 5000

type rateCaller struct {
	// lims are, by limit, the Limiters the caller calls in turn: one, on
	// every node, but under the rate-one-yes plant (see oneYesViews).
	lims  [][]*ratelimit.Limiter
	turn  int // of run's goroutine
	n     int // the worker's
	close func()
	rng   *rand.Rand
}

// dialNodes returns a node of each address on its own client of w's
// library, as newLocker makes them.
func dialNodes(w Worker, addrs []string) ([]node.Node, func(), error) {
	var nodes []node.Node
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for _, a := range addrs {
		if w.Client == "go-redis" {
			c := redis.NewClient(&redis.Options{Addr: a})
			n := goredis.New(c)
			nodes = append(nodes, n)
			closers = append(closers, func() { _ = c.Close() }, func() { _ = n.Close() })
			continue
		}
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{a}, DisableCache: true})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("valkey-go client for %s: %w", a, err)
		}
		n := valkeygo.New(c)
		nodes = append(nodes, n)
		closers = append(closers, c.Close, func() { _ = n.Close() })
	}
	return nodes, closeAll, nil
}

// newRateLoad builds each worker's Limiters, with the rate-one-yes plant
// when cfg asks for it.
func newRateLoad(p *Plan, cfg Config, addrs []string) (*rateLoad, error) {
	rl := &rateLoad{plant: cfg.Plant, adms: make([][]safety.Admission, len(rateLimits)), refs: make([][]time.Time, len(rateLimits))}
	for i, w := range p.Workers {
		nodes, closeFn, err := dialNodes(w, addrs)
		if err != nil {
			rl.close()
			return nil, err
		}
		views := [][]node.Node{nodes}
		if cfg.Plant == PlantRateOneYes {
			one, err := oneYesViews(nodes)
			if err != nil {
				closeFn()
				rl.close()
				return nil, err
			}
			views = nil
			for _, n := range one {
				views = append(views, []node.Node{n})
			}
		}
		c := &rateCaller{n: i, close: closeFn}
		for _, rlim := range rateLimits {
			limit := rlim.limit
			if cfg.Plant == PlantRateStingy {
				limit.Rate = max(1, limit.Rate/4)
			}
			var lims []*ratelimit.Limiter
			for _, v := range views {
				lim, err := ratelimit.New(v, limit, option.NodeTimeout(p.NodeTimeout))
				if err != nil {
					c.lims = append(c.lims, lims)
					c.closeAll()
					rl.close()
					return nil, fmt.Errorf("worker %d: rate limit %s: %w", i, rlim.limit, err)
				}
				lims = append(lims, lim)
			}
			c.lims = append(c.lims, lims)
		}
		h := fnv.New64a()
		h.Write([]byte("rate " + p.Strategy))
		c.rng = rand.New(rand.NewPCG(uint64(p.Seed), h.Sum64()+uint64(i)))
		rl.callers = append(rl.callers, c)
	}
	rl.warm()
	return rl, nil
}

func (c *rateCaller) closeAll() {
	for _, ls := range c.lims {
		for _, l := range ls {
			_ = l.Close()
		}
	}
	c.close()
}

func (rl *rateLoad) close() {
	for _, c := range rl.callers {
		c.closeAll()
	}
}

// start runs one goroutine per caller, in wg, until ctx ends.
func (rl *rateLoad) start(ctx context.Context, wg *sync.WaitGroup) {
	for _, c := range rl.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl.run(ctx, c)
		}()
	}
}

// ratePace is how often each caller calls, alternating the limits: six
// callers want about three times what the limits admit. rateInFlight
// bounds a caller's calls running at once, so that a slow link (latency)
// still carries more calls than the limits admit.
const (
	ratePace     = 45 * time.Millisecond
	rateInFlight = 4
)

// pace is ratePace, or twice as long under the race detector, where the
// quorum's 600-odd node calls a second starve two cores (seen: 2231 of
// 2362 calls failed, and 21 of 29 lock calls, on node timeouts), but for
// the rate-one-yes plant: a quorum that admits on one yes admits up to
// 5/3 of the rate before RATE's bound is passed, so its callers must
// want more than that.
func (rl *rateLoad) pace() time.Duration {
	if raceDetector == 1 && rl.plant != PlantRateOneYes {
		return 2 * ratePace
	}
	return ratePace
}

// run paces c's calls, each in a goroutine of its own that run waits
// for: a tick that finds rateInFlight of them still running is skipped.
func (rl *rateLoad) run(ctx context.Context, c *rateCaller) {
	var calls sync.WaitGroup
	defer calls.Wait()
	slots := make(chan struct{}, rateInFlight)
	pace := rl.pace()
	sleep(ctx, time.Duration(c.rng.Int64N(int64(pace))))
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		c.turn++
		i := c.turn % len(c.lims)
		lim := c.lims[i][(c.turn/len(c.lims))%len(c.lims[i])]
		calls.Add(1)
		go func() {
			defer calls.Done()
			defer func() { <-slots }()
			rl.call(ctx, c.n, lim, i)
		}()
	}
}

// call makes one Allow of lim on limit i's key and records it.
func (rl *rateLoad) call(ctx context.Context, caller int, lim *ratelimit.Limiter, i int) {
	cctx, cancel := context.WithTimeout(ctx, rateCall)
	start := time.Now()
	r, err := lim.Allow(cctx, rateLimits[i].key)
	end := time.Now()
	cancel()
	rl.calls.Add(1)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			rl.failed.Add(1)
			e := rateErr{at: end, caller: caller}
			rl.mu.Lock()
			text := err.Error()
			if k, ok := rl.texts[text]; ok {
				e.err = k
			} else if len(rl.texts) < maxRateErrs {
				if rl.texts == nil {
					rl.texts = map[string]string{}
				}
				rl.texts[text] = text
				e.err = text
			}
			rl.errs = append(rl.errs, e)
			rl.mu.Unlock()
		}
	case r.Allowed:
		rl.admitted.Add(1)
		rl.mu.Lock()
		rl.adms[i] = append(rl.adms[i], safety.Admission{Start: start, End: end})
		rl.mu.Unlock()
	default:
		rl.refused.Add(1)
		rl.mu.Lock()
		rl.refs[i] = append(rl.refs[i], end)
		rl.mu.Unlock()
	}
}

// warm calls every Limiter once, before the fault phase, so that the
// first calls of the run do not pay for the clients' first dials.
func (rl *rateLoad) warm() {
	for _, c := range rl.callers {
		for i, ls := range c.lims {
			for _, l := range ls {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = l.Allow(ctx, rateLimits[i].key)
				cancel()
			}
		}
	}
}

// rateNodes is how many servers the strategy's Limiters ask, and how many
// must admit.
func rateNodes(p *Plan) (nodes, majority int) {
	if p.Strategy == Single {
		return 1, 1
	}
	return len(p.AOF), len(p.AOF)/2 + 1
}

// rateRefills returns, by node of the Limiters, the faults that may hand
// it a burst more than its clock allows: on the quorum, each kill of the
// node (a restart empty, or from an older snapshot or AOF) and each of its
// clock's steps; on the single master, each loss of its data (a kill of
// the master, a failover: the replica may have missed the latest writes)
// and every clock step, on whichever server (roles swap).
func rateRefills(p *Plan, events []*Event) [][]safety.Span {
	n, _ := rateNodes(p)
	out := make([][]safety.Span, n)
	for _, e := range events {
		if e.Skipped != "" && e.Kind != KillEmpty && e.Kind != KillRDB && e.Kind != KillAOF || e.Start.IsZero() {
			continue // a kill skipped in part may still have killed one
		}
		s := safety.Span{From: e.Start, To: e.End}
		clock := e.Kind == ClockForward || e.Kind == ClockBack
		if p.Strategy == Single {
			if clock || e.LostData() {
				out[0] = append(out[0], s)
			}
			continue
		}
		switch {
		case clock:
			out[e.Targets[0]] = append(out[e.Targets[0]], s)
		case e.Kind == KillEmpty || e.Kind == KillRDB || e.Kind == KillAOF:
			for _, j := range e.Targets {
				out[j] = append(out[j], s)
			}
		}
	}
	return out
}

// rateDisturbed returns the stretches the floor does not judge: when a
// fault stands between the callers and the admissions a limit owes them.
// On the single strategy, any fault on the master or on the clients' link
// (a pause, latency, a timeout or reset toxic, a kill, a failover, a
// clock off); on the quorum, when faults (latency included: past the
// node timeout a node counts as a refusal) are active on N-M nodes or
// more at once, so that a majority has no node to spare. A fault reaches
// floorSettle past its end, a clock fault its jump further (a clock put
// back leaves its server's limit that much ahead).
func rateDisturbed(p *Plan, events []*Event) []safety.Span {
	n, majority := rateNodes(p)
	per := make([][]safety.Span, n)
	for _, e := range events {
		if e.Start.IsZero() || e.Skipped != "" && e.Kind != KillEmpty && e.Kind != KillRDB && e.Kind != KillAOF {
			continue
		}
		to := e.End.Add(floorSettle)
		var targets []int
		switch e.Kind {
		case ClockForward, ClockBack:
			to = to.Add(e.Jump)
			targets = e.Targets
		case Pause, KillEmpty, KillRDB, KillAOF, Latency, Timeout, ResetPeer:
			targets = e.Targets
		case Failover:
			targets = []int{0}
		}
		if p.Strategy == Single {
			// The one Limiter's node is whichever server is the master:
			// what counts is whether the fault hit it, which a kill of
			// "the replica" does when a failover swapped the roles
			// before it ran (its Targets are none: see Fault.Replica).
			hit := false
			switch e.Kind {
			case ClockForward, ClockBack, Failover:
				hit = true
			case Pause:
				hit = len(e.Roles) > 0 && e.Roles[0] == "master"
			case Latency, Timeout, ResetPeer:
				// The replication link's are none of the clients'. On
				// theirs, latency is an outage too: the proxy delays
				// each chunk it forwards in turn, so the answers a
				// valkey-go connection pipelines wait for each other's
				// delays and its calls time out, and the proxy is
				// rebuilt to add the toxic, which closes every
				// connection (redistest.Proxy.AddToxic).
				hit = e.Targets[0] == 0
			case KillEmpty, KillRDB, KillAOF:
				hit = e.LostData()
			}
			targets = nil
			if hit {
				targets = []int{0}
			}
		}
		for _, j := range targets {
			per[j] = append(per[j], safety.Span{From: e.Start, To: to})
		}
	}
	if p.Strategy == Single {
		return atLeast(per, 1)
	}
	// With N-M nodes out, the rest must all agree, and near the limit
	// they disagree (docs/ratelimit.md measured 66-89% of the ideal so).
	return atLeast(per, n-majority)
}

// floorDisturbed returns the stretches the floor does not judge: those of
// rateDisturbed and starved, on the quorum joined where less than floorGap
// apart.
func floorDisturbed(p *Plan, events []*Event, starved []safety.Span) []safety.Span {
	var gap time.Duration
	if p.Strategy == Quorum {
		gap = floorGap
	}
	return safety.JoinSpans(append(rateDisturbed(p, events), starved...), gap)
}

// atLeast returns the stretches in which at least k of the nodes are in
// one of their spans.
func atLeast(per [][]safety.Span, k int) []safety.Span {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, ss := range per {
		for _, s := range safety.MergeSpans(ss) {
			edges = append(edges, edge{s.From, 1}, edge{s.To, -1})
		}
	}
	slices.SortStableFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return b.d - a.d // starts before ends at one instant
	})
	var out []safety.Span
	var from time.Time
	depth := 0
	for _, e := range edges {
		before := depth
		depth += e.d
		switch {
		case before < k && depth >= k:
			from = e.at
		case before >= k && depth < k:
			out = append(out, safety.Span{From: from, To: e.at})
		}
	}
	return out
}

// rateViolations judges every limit's admissions of the fault phase,
// fills res.Rate and res.Judged for RATE and RATE floor, and returns the
// violations by key.
func (rl *rateLoad) violations(p *Plan, events []*Event, starved []safety.Span, t0 time.Time, res *Result) []keyViolations {
	end := t0.Add(p.Duration)
	n, majority := rateNodes(p)
	refills := rateRefills(p, events)
	// The floor does not judge where the process itself was starved (see
	// starvation); RATE, a bound, judges everywhere.
	disturbed := floorDisturbed(p, events, starved)
	// Where faults stand in the limit's way (the floor's disturbed
	// stretches), a window in which no call was answered had nothing to
	// judge: it counts neither way in RATE's judged share.
	outages := disturbed
	st := &RateStats{Calls: rl.calls.Load(), Admitted: rl.admitted.Load(), Refused: rl.refused.Load(),
		Errors: rl.failed.Load(), Floor: RateFloor, FloorMin: 1}
	rl.mu.Lock()
	for _, e := range rl.errs {
		calm := true
		for _, d := range disturbed {
			if !e.at.Before(d.From) && !e.at.After(d.To) {
				calm = false
				break
			}
		}
		if calm {
			st.CalmErrors++
		}
	}
	rl.mu.Unlock()
	var out []keyViolations
	var windows, judged, fWindows, fJudged int
	calm := 1.0
	floorSum := 0.0
	for i, rlim := range rateLimits {
		rl.mu.Lock()
		adms := slices.Clone(rl.adms[i])
		refs := slices.Clone(rl.refs[i])
		rl.mu.Unlock()
		iv := safety.Interval(rlim.limit.Rate, rlim.limit.Per)
		rep := safety.CheckRate(safety.RateLimit{Interval: iv, Burst: rlim.limit.Burst, Nodes: n, Majority: majority, Refills: refills, Refused: refs, Outages: outages},
			adms, t0, end, rateWidth, rateStep)
		windows, judged = windows+rep.Windows-rep.Unreachable, judged+rep.Judged
		if rep.Worst > st.Worst {
			st.Worst, st.WorstRefill = rep.Worst, rep.WorstFaulty
		}
		fl := safety.CheckRateFloor(iv, adms, disturbed, RateFloor, t0, end, floorWidth, floorStep, floorCalm)
		for j := range fl.Violations {
			fl.Violations[j].Detail += rl.calmAnswers(i, fl.Violations[j].At, fl.Violations[j].At.Add(floorWidth), disturbed)
		}
		fWindows, fJudged = fWindows+fl.Windows, fJudged+fl.Judged
		calm = min(calm, fl.Calm)
		if fl.Judged > 0 {
			st.FloorMin = min(st.FloorMin, fl.Min)
			floorSum += fl.Mean * float64(fl.Judged)
		}
		out = append(out, keyViolations{rlim.key, append(rep.Violations, fl.Violations...)})
	}
	if fJudged > 0 {
		st.FloorMean = floorSum / float64(fJudged)
	}
	res.Judged[string(safety.Rate)] = share(judged, windows)
	res.Judged[string(safety.RateFloor)] = share(fJudged, fWindows)
	st.Calm = calm
	st.Starved = spanShare(starved, t0, end)
	res.Rate = st
	return out
}

// calmAnswers says, for a floor finding on limit i's window [a, b), how
// the calls that ended in its calm part (outside disturbed) were
// answered: refused, or failed, and the first failure.
func (rl *rateLoad) calmAnswers(i int, a, b time.Time, disturbed []safety.Span) string {
	calm := func(t time.Time) bool {
		if t.Before(a) || !t.Before(b) {
			return false
		}
		for _, d := range disturbed {
			if !t.Before(d.From) && !t.After(d.To) {
				return false
			}
		}
		return true
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	refused := 0
	for _, t := range rl.refs[i] {
		if calm(t) {
			refused++
		}
	}
	n, callers, texts := 0, map[int]int{}, map[string]int{}
	first := ""
	for _, e := range rl.errs {
		if !calm(e.at) {
			continue
		}
		if n++; first == "" && e.err != "" {
			first = fmt.Sprintf(", the first worker %d: %s", e.caller, e.err)
		}
		callers[e.caller]++
		texts[e.err]++
	}
	if n == 0 {
		return fmt.Sprintf("; in its calm part %d refused, no call failed", refused)
	}
	most, times := "", 0
	for text, k := range texts {
		if k > times || k == times && text < most {
			most, times = text, k
		}
	}
	return fmt.Sprintf("; in its calm part %d refused, %d failed (of either limit), by worker %v%s; the most (%d): %q",
		refused, n, callers, first, times, most)
}

// keyViolations are the violations found on one key.
type keyViolations struct {
	key string
	vs  []safety.Violation
}

func share(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// spanShare is the share of [from, to) the merged spans ss cover.
func spanShare(ss []safety.Span, from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	var covered time.Duration
	for _, s := range ss {
		a, b := s.From, s.To
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			covered += b.Sub(a)
		}
	}
	return float64(covered) / float64(to.Sub(from))
}

// summary is the rate limits' line of Result.Summary.
func (st *RateStats) summary() string {
	return fmt.Sprintf("rate limits (%s; %s): %d calls, %d admitted, %d refused, %d errors (%d outside the floor's disturbed stretches); the worst %v window at %.2f of its bound (refill in it: %v); calm %v windows admitted %.0f%%..%.0f%% (mean) of the ideal, floor %.0f%%, calm %.0f%% of the run; the test process starved in %.1f%% of it",
		rateLimits[0].limit, rateLimits[1].limit, st.Calls, st.Admitted, st.Refused, st.Errors, st.CalmErrors, rateWidth, st.Worst, st.WorstRefill,
		floorWidth, 100*st.FloorMin, 100*st.FloorMean, 100*st.Floor, 100*st.Calm, 100*st.Starved)
}
