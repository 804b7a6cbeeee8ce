package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
)

// Config is one run.
type Config struct {
	Strategy string
	Seed     int64
	Duration time.Duration // of the fault phase
	Bias     Bias
	// GuardOff builds the quorum's Lockers option.DurableNodes on servers
	// that are not durable: the lost-data guard off, a misconfiguration.
	GuardOff bool
	// Unfenced makes the protected resources accept every write.
	Unfenced bool
	// EarlyGrant makes the Lockers grant a lock early, a broken lock: the
	// single strategy's claim in its holder's last 50 ms (earlyGrant), the
	// quorum's vote in the lock's last 100 ms on each node (earlyVote).
	EarlyGrant bool
	earlySwaps *atomic.Int64 // the claims EarlyGrant changed
	// Plant plants a bug of Plants in the library's use (see plants.go),
	// for TestNemesisCatches and -nemesis.plant; empty for none.
	Plant string
	trust *trust // the trusting-resume plant's word
	// SQL keeps each lock key's register in a table of a real PostgreSQL
	// (sqlRegister), written through package sqlfence.
	SQL bool
	// SkipMem leaves the memory check out.
	SkipMem bool
	// Replay is the command that runs this configuration again, for the
	// report.
	Replay string
}

// MemBound is the most memory the server keys of one lock key may use on
// one server once the run has healed and its leases have ended: the single
// strategy's hash (~130 B) or the quorum's fence counter (~82 B), with
// room to spare; anything else (records of gone owners, queues) must have
// expired.
const MemBound = 512

// memWait bounds how long the memory check waits for per-key state to
// expire.
const memWait = 20 * time.Second

// LiveBound is how soon after healing every key must be acquirable again.
// Quorum: a node restarted just before healing sits out one max TTL, then
// needs one attempt (a node timeout) to be repaired; leases still held
// expire within a TTL, of which an attempt gives up the drift; then one
// more TTL and 3 s for a loaded machine. Single: a lease still held, or
// one restored from a snapshot, ends within a TTL; twice that and 3 s.
func LiveBound(p *Plan) time.Duration {
	if p.Strategy == Single {
		return 2*p.TTL + 3*time.Second
	}
	return p.TTL + p.NodeTimeout + settings.Drift(p.TTL, settings.DefaultDriftFactor) + 2*p.TTL + 3*time.Second
}

// Finding is a violation of a promise, with where to look for its cause.
type Finding struct {
	Key       string   `json:"key"`
	Property  string   `json:"property"`
	At        string   `json:"at"` // from the start of the fault phase
	Detail    string   `json:"detail"`
	Suspects  []string `json:"suspects,omitempty"`
	ExcusedBy string   `json:"excused_by,omitempty"`
}

// Probe is one key's LIVE acquisition after healing.
type Probe struct {
	Key    string  `json:"key"`
	Client string  `json:"client"`
	After  float64 `json:"after_s"` // seconds after healing
	Err    string  `json:"err,omitempty"`
}

// Mem is one key's memory after healing.
type Mem struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"` // the most on any one server
	// Server is where it was most; Names its server keys there, with sizes.
	Server int      `json:"server"`
	Names  []string `json:"names,omitempty"`
	// Per is how many units of MemBound the entry may take: 1 for a lock
	// key or a semaphore, the ids a work queue was given (0: 1).
	Per int `json:"per,omitempty"`
}

// bound is the most m may take.
func (m Mem) bound() int64 { return MemBound * int64(max(m.Per, 1)) }

// Result is what a run found.
type Result struct {
	Server   string         `json:"server"` // program and version, as the servers report them
	Strategy string         `json:"strategy"`
	Seed     int64          `json:"seed"`
	Duration string         `json:"duration"`
	Wall     string         `json:"wall"`
	Replay   string         `json:"replay"`
	Faults   map[Kind]int   `json:"faults"`  // ran, by kind
	Skipped  map[Kind]int   `json:"skipped"` // did not run (server busy)
	Counts   Counts         `json:"operations"`
	Broken   []Finding      `json:"broken"`  // promises broken
	Excused  map[string]int `json:"excused"` // violations the labels excuse, by property
	// Judged is, by property, the share of the fault phase in which no
	// window suspended it: how much of the run the promise was held to.
	// ReadersOrder is the read-write lock's readers' ORDER, whose windows
	// are their own (see readerWindows).
	Judged     map[string]float64 `json:"judged"`
	ExcusedEx  []Finding          `json:"excused_examples"` // a few of them
	Live       []Probe            `json:"live"`
	LiveBound  string             `json:"live_bound"`
	LiveOK     bool               `json:"live_ok"`
	Mem        []Mem              `json:"memory_per_key"`
	MemBound   int                `json:"memory_bound"`
	MemChecked bool               `json:"memory_checked"`
	MemOK      bool               `json:"memory_ok"`
	Errors     []string           `json:"errors,omitempty"` // of the harness
	// EarlyClaims counts the claims and votes Config.EarlyGrant ran
	// broken.
	EarlyClaims int64 `json:"early_claims,omitempty"`
	// Plant is the bug Config.Plant planted, if any.
	Plant string `json:"plant,omitempty"`
	// Rate and Handles are what the rate limits and the hand-offs by
	// handle did.
	Rate    *RateStats   `json:"rate,omitempty"`
	Handles *HandleStats `json:"handles,omitempty"`
	// SQL is what the PostgreSQL register saw (Config.SQL).
	SQL *SQLStats `json:"sql,omitempty"`
	// Schedule is every fault as it ran, from the start of the fault
	// phase.
	Schedule []string `json:"schedule"`
	Events   []*Event `json:"-"`
	Plan     *Plan    `json:"-"`
}

// BrokenBy returns how many promises of prop were broken.
func (r *Result) BrokenBy(prop safety.Property) int {
	n := 0
	for _, f := range r.Broken {
		if f.Property == string(prop) {
			n++
		}
	}
	return n
}

// Run runs one nemesis: deploy, warm, the workers under the planned
// faults for cfg.Duration, heal, then LIVE and MEM, and checks what the
// workers recorded. It fails t only for the harness's own errors (a server
// that would not start); what it finds is in the Result.
func Run(t *testing.T, cfg Config) *Result {
	t.Helper()
	began := time.Now()
	cfg.earlySwaps = new(atomic.Int64)
	switch cfg.Plant {
	case "", PlantRateOneYes, PlantRateStingy:
	case PlantTrustingResume:
		cfg.trust = &trust{}
	case PlantEarlyGrant:
		cfg.EarlyGrant = true
	case PlantSQLUnfenced:
		cfg.SQL = true
	default:
		t.Fatalf("nemesis: plant %q: must be one of %q", cfg.Plant, Plants)
	}
	p := NewPlan(cfg.Seed, cfg.Strategy, cfg.Duration, cfg.Bias)
	t.Logf("nemesis %s seed %d: %d servers (aof %v), ttl %v, node timeout %v, keys %q, workers %v",
		p.Strategy, p.Seed, len(p.AOF), p.AOF, p.TTL, p.NodeTimeout, p.Keys, p.Workers)
	var sched strings.Builder
	for _, f := range p.Faults {
		sched.WriteString("\n  " + f.String())
	}
	t.Logf("schedule, %d faults:%s", len(p.Faults), sched.String())

	d := deploy(t, p)
	wl := newWorkload(t, p, cfg, d.addrs())
	defer wl.close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	starving := watchStarvation()
	wl.start(ctx)
	t0 := time.Now()
	events := inject(d, wl, p, t0)
	var harness []string
	if err := d.heal(); err != nil {
		harness = append(harness, "heal: "+err.Error())
	}
	stop()
	wl.wait()
	wl.starved = starving.close()
	healed := time.Now()
	t.Logf("faults over and healed %.1fs after the fault phase began", healed.Sub(t0).Seconds())

	res := &Result{Strategy: p.Strategy, Server: d.version(), Seed: p.Seed, Duration: p.Duration.String(), Replay: cfg.Replay,
		Faults: map[Kind]int{}, Skipped: map[Kind]int{}, Excused: map[string]int{}, Judged: map[string]float64{},
		Counts: wl.counts(), MemBound: MemBound, Events: events, Plan: p, Plant: cfg.Plant}
	for _, e := range events {
		res.Schedule = append(res.Schedule, fmt.Sprintf("ran +%.3fs..+%.3fs: %s", e.Start.Sub(t0).Seconds(), e.End.Sub(t0).Seconds(), e))
		if e.Skipped != "" {
			res.Skipped[e.Kind]++
		} else {
			res.Faults[e.Kind]++
		}
		if e.Err != "" {
			harness = append(harness, e.String())
		}
	}

	res.Live, res.LiveOK = live(p, cfg, d, healed)
	res.LiveBound = LiveBound(p).String()
	if !cfg.SkipMem {
		res.MemChecked = true
		res.Mem, res.MemOK = memory(p, d)
	}
	wl.mu.Lock()
	harness = append(harness, wl.errs...)
	wl.mu.Unlock()
	res.Errors = harness
	res.EarlyClaims = cfg.earlySwaps.Load()
	evaluate(p, wl, events, t0, res)
	if wl.sql != nil {
		st, found, err := wl.sql.check(t0, p.Duration)
		if err != nil {
			res.Errors = append(res.Errors, "the PostgreSQL register's log: "+err.Error())
		}
		res.SQL, res.Judged[SQLFence] = st, st.Judged
		res.Broken = append(res.Broken, found...)
	}
	res.Wall = time.Since(began).Round(100 * time.Millisecond).String()
	return res
}

// inject runs the schedule from t0 and returns when the fault phase is
// over and every fault has ended.
func inject(d *deployment, wl *workload, p *Plan, t0 time.Time) []*Event {
	var wg sync.WaitGroup
	events := make([]*Event, len(p.Faults))
	for i, f := range p.Faults {
		events[i] = &Event{Fault: f}
		time.Sleep(time.Until(t0.Add(f.At)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.apply(f, events[i], wl)
		}()
	}
	time.Sleep(time.Until(t0.Add(p.Duration)))
	wg.Wait()
	return events
}

// live acquires every key, with a Locker of each client library, within
// LiveBound of healing.
func live(p *Plan, cfg Config, d *deployment, healed time.Time) ([]Probe, bool) {
	ctx, cancel := context.WithDeadline(context.Background(), healed.Add(LiveBound(p)))
	defer cancel()
	type probeLocker struct {
		client string
		lk     dlock.Locker
	}
	var lks []probeLocker
	for _, client := range []string{"go-redis", "valkey-go"} {
		w := Worker{Client: client, Locker: QuorumLocker}
		if p.Strategy == Single {
			w.Locker = SingleLocker
		}
		lk, _, closeFn, err := newLocker(p, cfg, w, d.addrs())
		if err != nil {
			return []Probe{{Client: client, Err: err.Error()}}, false
		}
		defer closeFn()
		lks = append(lks, probeLocker{client, lk})
	}
	var mu sync.Mutex
	var out []Probe
	ok := true
	var wg sync.WaitGroup
	for _, pl := range lks {
		for _, key := range p.Keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr := Probe{Key: key, Client: pl.client}
				l, err := pl.lk.Acquire(ctx, key)
				pr.After = time.Since(healed).Seconds()
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					pr.Err = err.Error()
				}
				mu.Lock()
				defer mu.Unlock()
				ok = ok && err == nil
				out = append(out, pr)
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b Probe) int { return strings.Compare(a.Key+a.Client, b.Key+b.Client) })
	return out, ok
}

// memory polls, for up to memWait, the memory every lock key's server keys
// use on each server, until it is within MemBound everywhere.
func memory(p *Plan, d *deployment) ([]Mem, bool) {
	deadline := time.Now().Add(memWait)
	for {
		mems, err := measure(p, d)
		ok := err == nil
		for _, m := range mems {
			ok = ok && m.Bytes <= m.bound()
		}
		if ok || time.Now().After(deadline) {
			if err != nil {
				mems = append(mems, Mem{Key: "error: " + err.Error(), Bytes: -1})
			}
			return mems, ok
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func measure(p *Plan, d *deployment) ([]Mem, error) {
	// The lockers' warm-up locks are keys too, bounded as any other; they
	// are reported as one, by the largest.
	keys := slices.Clone(p.Keys)
	for i := range redistest.WarmRounds {
		keys = append(keys, redistest.WarmKey(i))
	}
	mems := make([]Mem, len(p.Keys)+1)
	for i, k := range p.Keys {
		mems[i] = Mem{Key: k, Server: -1}
	}
	mems[len(p.Keys)] = Mem{Key: fmt.Sprintf("%s..%s (warm-up)", redistest.WarmKey(0), redistest.WarmKey(redistest.WarmRounds-1)), Server: -1}
	// The permits' keys, bounded as a lock's are, are one more entry.
	var raw []string
	if p.Permits != "" {
		raw = append(raw, permits.KeyOf(p.Permits), claims.KeyOf(queueName))
		mems = append(mems, Mem{Key: "permits " + p.Permits, Server: -1},
			Mem{Key: "claims " + queueName, Server: -1, Per: queueIDs})
	}
	// The read-write lock's keys, bounded as a lock's are: once its leases
	// and tickets have ended, its hash (the counter; ~168 B, see
	// rwlock/memory_test.go) is all it keeps.
	if p.RWLock != "" {
		raw = append(raw, rwlock.KeyOf(p.RWLock))
		mems = append(mems, Mem{Key: "rwlock " + p.RWLock, Server: -1})
	}
	// The rate limits' keys: each expires when its limit is full again.
	for _, rl := range rateLimits {
		raw = append(raw, ratelimit.KeyOf(rl.key))
		mems = append(mems, Mem{Key: "ratelimit " + rl.key, Server: -1})
	}
	var stray []string
	for _, s := range d.srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		per, names, other, err := keyMemory(c, keys, raw)
		_ = c.Close()
		if err != nil {
			return mems, fmt.Errorf("server %d: %w", s.n, err)
		}
		for i := range keys {
			m := &mems[min(i, len(p.Keys))]
			if m.Server < 0 || per[i] > m.Bytes {
				m.Bytes, m.Server, m.Names = per[i], s.n, names[i]
			}
		}
		for j := range raw {
			i := len(keys) + j
			if m := &mems[len(p.Keys)+1+j]; m.Server < 0 || per[i] > m.Bytes {
				m.Bytes, m.Server, m.Names = per[i], s.n, names[i]
			}
		}
		for _, n := range other {
			stray = append(stray, fmt.Sprintf("server %d: %s", s.n, n))
		}
	}
	if len(stray) > 0 {
		// A name of dlock's that no lock key accounts for: state that
		// leaked under a name the strategies do not use, or mis-spelled.
		mems = append(mems, Mem{Key: "(keys of no lock)", Bytes: MemBound + 1, Server: -1, Names: stray})
	}
	return mems, nil
}

// keyMemory sums MEMORY USAGE of the server keys of each lock key: under
// either strategy's name for it (see keyname), the name itself and every
// name under it followed by ":"; then likewise of each raw base name (a
// permits name's keys), whose sums follow the keys'. The filter runs here and not in SCAN's
// MATCH, since keys may hold glob characters. other lists the names that
// start with "dlock:" and belong to no lock key, but the node-wide ones.
func keyMemory(c *redis.Client, keys, raw []string) (per []int64, names [][]string, other []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	per = make([]int64, len(keys)+len(raw))
	names = make([][]string, len(keys)+len(raw))
	bases := make([][]string, len(keys), len(keys)+len(raw))
	for i, k := range keys {
		bases[i] = []string{keyname.Quorum(k)}
		if s := keyname.Single(k); s != bases[i][0] {
			bases[i] = append(bases[i], s)
		}
	}
	for _, r := range raw {
		bases = append(bases, []string{r})
	}
	var cursor uint64
	for {
		batch, next, err := c.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return nil, nil, nil, err
		}
	name:
		for _, name := range batch {
			for i, bs := range bases {
				for _, base := range bs {
					if name != base && !strings.HasPrefix(name, base+":") {
						continue
					}
					n, err := c.MemoryUsage(ctx, name).Result()
					if errors.Is(err, redis.Nil) {
						continue name // expired since the scan
					}
					if err != nil {
						return nil, nil, nil, err
					}
					per[i] += n
					names[i] = append(names[i], fmt.Sprintf("%q %d B", name, n))
					continue name
				}
			}
			if strings.HasPrefix(name, "dlock:") && !slices.Contains(keyname.NodeWide, name) {
				other = append(other, strconv.Quote(name))
			}
		}
		if cursor = next; cursor == 0 {
			return per, names, other, nil
		}
	}
}

// maxExamples bounds the excused violations of each property a Result
// keeps as examples.
const maxExamples = 3

// evaluate checks every key's history and acquisitions, and classifies
// each violation by the windows of the faults that ran.
func evaluate(p *Plan, wl *workload, events []*Event, t0 time.Time, res *Result) {
	ws := Windows(p, events)
	end := t0.Add(p.Duration)
	for _, prop := range Properties {
		res.Judged[string(prop)] = Judged(ws, prop, t0, end)
	}
	classify := func(k string, vs []safety.Violation, ws []safety.Window) {
		broken, excused := safety.Classify(vs, ws)
		for _, v := range broken {
			f := finding(k, v, t0)
			if !v.At.IsZero() {
				f.Suspects = suspects(p, events, v.At)
			}
			res.Broken = append(res.Broken, f)
		}
		for _, x := range excused {
			res.Excused[string(x.Property)]++
			if res.Excused[string(x.Property)] <= maxExamples {
				f := finding(k, x.Violation, t0)
				f.ExcusedBy = x.By.Why
				res.ExcusedEx = append(res.ExcusedEx, f)
			}
		}
	}
	stale := wl.checkCompletions()
	var keyVs []keyViolations // for HANDLE
	for _, k := range append(p.resources(), wl.itemKeys()...) {
		r := wl.res[k]
		if r == nil {
			wl.mu.Lock()
			r = wl.items[k]
			wl.mu.Unlock()
		}
		rep := r.Check()
		wl.mu.Lock()
		acqs := slices.Clone(wl.acqs[k])
		wl.mu.Unlock()
		vs := append(rep.Violations, safety.CheckOrder(acqs)...)
		for _, s := range stale {
			if s.key == k {
				vs = append(vs, s.v)
			}
		}
		classify(k, vs, ws)
		keyVs = append(keyVs, keyViolations{k, vs})
	}
	for _, kv := range wl.rate.violations(p, events, wl.starved, t0, res) {
		classify(kv.key, kv.vs, nil) // the bound counts the faults
	}
	hws := handleWindows(p, events, ws)
	res.Judged[string(safety.Handle)] = Judged(hws, safety.Handle, t0, end)
	for _, kv := range wl.hand.violations(keyVs) {
		classify(kv.key, kv.vs, hws)
	}
	res.Handles = wl.hand.stats()
	if p.RWLock != "" {
		vs, readerVs, readerWs := wl.rwViolations(events, ws)
		classify(rwKey(p.RWLock), vs, ws)
		classify(rwKey(p.RWLock), readerVs, readerWs)
		res.Judged[ReadersOrder] = Judged(readerWs, safety.Order, t0, end)
	}
}

// Properties are the promises judged on every key, in the order reports
// show them.
var Properties = []safety.Property{safety.MutualExclusion, safety.Order, safety.Fencing,
	safety.Rate, safety.RateFloor, safety.Handle}

// ReadersOrder names, in Result.Judged, the read-write lock's readers'
// ORDER.
const ReadersOrder = "ORDER (rw readers)"

// SQLFence names, in Result.Judged, FENCE as the PostgreSQL register's
// log judges it (SQLStats.Judged: the share of the fault phase's seconds
// in which a write was answered); its findings are FENCE's.
const SQLFence = "FENCE (sql)"

// MinJudged is the least share of a run in which every property must be
// judged: a schedule whose windows excuse more is not a test of it.
const MinJudged = 0.5

// behindClasses says how many of the read-write lock's reads behind
// each class holds (see rwBehindClasses); the rest are FENCE findings.
func (r *Result) behindClasses() string {
	var parts []string
	for _, c := range behindKinds {
		parts = append(parts, fmt.Sprintf("%d %s", r.Excused[string(c)], strings.TrimPrefix(string(c), "BEHIND:")))
	}
	return strings.Join(parts, ", ")
}

// judgedKeys lists r.Judged's keys in report order.
func (r *Result) judgedKeys() []string {
	var ks []string
	for _, p := range Properties {
		ks = append(ks, string(p))
	}
	for _, k := range []string{ReadersOrder, SQLFence} {
		if _, ok := r.Judged[k]; ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// Underjudged lists the properties judged in less than MinJudged of the
// run, with their shares.
// FENCE (sql) is held to none: no window excuses its findings, and its
// share is the database's use, the seconds in which a lock was held and
// written under, which a storm that keeps a majority down empties;
// Underjudged asks only that a write landed.
func (r *Result) Underjudged() []string {
	var out []string
	if r.SQL != nil && r.SQL.Landed == 0 {
		out = append(out, "FENCE (sql): no write landed in PostgreSQL")
	}
	for _, k := range r.judgedKeys() {
		if j, ok := r.Judged[k]; ok && j < MinJudged && k != SQLFence {
			out = append(out, fmt.Sprintf("%s judged in %.0f%% of the run", k, 100*j))
		}
	}
	return out
}

func finding(key string, v safety.Violation, t0 time.Time) Finding {
	f := Finding{Key: key, Property: string(v.Property), Detail: v.Detail}
	if !v.At.IsZero() {
		f.At = fmt.Sprintf("+%.3fs", v.At.Sub(t0).Seconds())
	}
	return f
}

// Summary is the Result in a few lines, for a test's log and its failure
// message: the seed first, then what ran, what broke, LIVE and MEM, and
// how to replay it.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis %s on %s, seed %d: %s of faults (%s wall): %s\n", r.Strategy, r.Server, r.Seed, r.Duration, r.Wall, faultCounts(r.Faults))
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "  skipped (server busy): %s\n", faultCounts(r.Skipped))
	}
	c := r.Counts
	fmt.Fprintf(&b, "  %d Do, %d grants, %d acquisitions failed or timed out, %d writes (%d refused by the fence), %d reads, %d holder pauses (%d late writes refused)\n",
		c.Dos, c.Grants, c.AcquireErrors, c.Writes, c.WritesRefused, c.Reads, c.Pauses, c.PausedRefused)
	if c.ItemClaims > 0 {
		fmt.Fprintf(&b, "  %d item claims (%d of an id completed before and added again), %d completions\n", c.ItemClaims, c.ItemsReAdded, c.ItemsDone)
	}
	if c.RWWriters+c.RWReaders > 0 {
		fmt.Fprintf(&b, "  read-write lock: %d writer grants, %d reader grants (%d reads by a valid reader of a register written under a newer token: %s)\n",
			c.RWWriters, c.RWReaders, c.RWReadsBehind, r.behindClasses())
	}
	if c.SetGrants > 0 {
		fmt.Fprintf(&b, "  %d sets of two lock keys held at once (AcquireAll), each key checked with the key's other leases\n", c.SetGrants)
	}
	if c.Breaks > 0 || c.Terms > 0 || c.Overstays > 0 {
		fmt.Fprintf(&b, "  %d breaks (%d of a held key, %d failed), %d terms of office, %d leases held to their end with a waiter queued\n",
			c.Breaks, c.BreaksHeld, c.BreaksFailed, c.Terms, c.Overstays)
		b.WriteString(breakNotes(r.Events, 3))
	}
	if r.EarlyClaims > 0 {
		fmt.Fprintf(&b, "  early grant planted: %d claims or votes ran broken\n", r.EarlyClaims)
	}
	if r.Rate != nil {
		fmt.Fprintf(&b, "  %s\n", r.Rate.summary())
	}
	if r.Handles != nil {
		fmt.Fprintf(&b, "  %s\n", r.Handles.summary())
	}
	if r.SQL != nil {
		fmt.Fprintf(&b, "  %s\n", r.SQL.summary())
	}
	if r.Plant != "" {
		fmt.Fprintf(&b, "  planted: %s\n", r.Plant)
	}
	for _, prop := range Properties {
		fmt.Fprintf(&b, "  %s: %d broken, %d excused by the labels; judged in %.0f%% of the run\n", prop, r.BrokenBy(prop), r.Excused[string(prop)], 100*r.Judged[string(prop)])
		shown := 0
		for _, f := range r.Broken {
			if f.Property != string(prop) {
				continue
			}
			if shown++; shown > 3 {
				fmt.Fprintf(&b, "    … %d more\n", r.BrokenBy(prop)-3)
				break
			}
			fmt.Fprintf(&b, "    %s key %q: %s\n", f.At, f.Key, f.Detail)
			for _, s := range f.Suspects {
				fmt.Fprintf(&b, "      near %s\n", s)
			}
			if len(f.Suspects) == 0 {
				b.WriteString("      near no fault\n")
			}
		}
		for _, f := range r.ExcusedEx {
			if f.Property == string(prop) {
				fmt.Fprintf(&b, "    excused, e.g. %s key %q: %s\n      by %s\n", f.At, f.Key, f.Detail, f.ExcusedBy)
				break
			}
		}
	}
	if j, ok := r.Judged[ReadersOrder]; ok {
		fmt.Fprintf(&b, "  %s judged in %.0f%% of the run\n", ReadersOrder, 100*j)
	}
	verdict := "ok"
	if !r.LiveOK {
		verdict = "FAILED"
	}
	worst := 0.0
	for _, pr := range r.Live {
		worst = max(worst, pr.After)
	}
	fmt.Fprintf(&b, "  LIVE %s: every key acquired by %.2fs after healing (bound %s)\n", verdict, worst, r.LiveBound)
	for _, pr := range r.Live {
		if pr.Err != "" {
			fmt.Fprintf(&b, "    key %q with %s: %s after %.2fs\n", pr.Key, pr.Client, pr.Err, pr.After)
		}
	}
	if r.MemChecked {
		verdict = "ok"
		if !r.MemOK {
			verdict = "FAILED"
		}
		fmt.Fprintf(&b, "  MEM %s (bound %d B per key, or per queue item, per server):", verdict, r.MemBound)
		for _, m := range r.Mem {
			if m.Per > 1 {
				fmt.Fprintf(&b, " %q %d B for %d items;", m.Key, m.Bytes, m.Per)
				continue
			}
			fmt.Fprintf(&b, " %q %d B;", m.Key, m.Bytes)
		}
		b.WriteString("\n")
		for _, m := range r.Mem {
			if m.Bytes > m.bound() {
				fmt.Fprintf(&b, "    key %q on server %d: %s\n", m.Key, m.Server, strings.Join(m.Names, ", "))
			}
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "  harness error: %s\n", e)
	}
	fmt.Fprintf(&b, "  replay: %s", r.Replay)
	return b.String()
}

func faultCounts(m map[Kind]int) string {
	var parts []string
	total := 0
	for _, k := range Kinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
			total += m[k]
		}
	}
	return fmt.Sprintf("%d faults (%s)", total, strings.Join(parts, ", "))
}
