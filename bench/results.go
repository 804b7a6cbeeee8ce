package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Result is one case: a figure that does not apply to it is null in JSON.
type Result struct {
	ID          string `json:"id"`
	Case        string `json:"case"` // floor, lock+unlock, contention
	Library     string `json:"library"`
	Strategy    string `json:"strategy"`
	Variant     string `json:"variant,omitempty"`
	Client      string `json:"client"`
	Nodes       int    `json:"nodes"`
	Concurrency int    `json:"concurrency"`

	OpsPerS     *float64 `json:"ops_per_s"`
	P50us       *float64 `json:"p50_us"`
	P99us       *float64 `json:"p99_us"`
	XRTT        *float64 `json:"xrtt"`     // p50 over the same client's floor p50, same run
	XRTTp99     *float64 `json:"xrtt_p99"` // p99 over the same floor p50
	AllocsPerOp *float64 `json:"allocs_per_op"`
	BytesPerOp  *float64 `json:"bytes_per_op"`
	ClientCPUus *float64 `json:"client_cpu_us_per_op"` // CPU of this process (the library and its client) per op
	ServerCPUus *float64 `json:"server_cpu_us_per_op"` // CPU of the redis-server processes per op

	AcquisitionsPerS *float64 `json:"acquisitions_per_s"`
	SelfShare        *float64 `json:"self_share"` // acquisitions that went back to the goroutine that just released
	MaxShare         *float64 `json:"max_share"`  // busiest goroutine's acquisitions over a fair share (1 = fair)
	MinShare         *float64 `json:"min_share"`
	WaitP50ms        *float64 `json:"wait_p50_ms"`
	WaitP99ms        *float64 `json:"wait_p99_ms"`
	WaitMaxms        *float64 `json:"wait_max_ms"`
	GapP50ms         *float64 `json:"handoff_p50_ms"` // Release called → next holder's acquire returned
	GapP99ms         *float64 `json:"handoff_p99_ms"`
	HoldMeanms       *float64 `json:"hold_mean_ms"` // the 1 ms hold as slept; 1000/hold_mean_ms bounds acquisitions_per_s
	Busy             *float64 `json:"lock_busy"`    // share of the time the lock was held

	// What the case left on the servers once the runs were over: the
	// keys (summed over the servers; one case's keys are shared by its c=1
	// and c=64 rows) and the largest, MEMORY USAGE bytes.
	KeysLeft    *float64 `json:"keys_left,omitempty"`
	KeyBytesMax *float64 `json:"key_bytes_max,omitempty"`

	Ops        int64  `json:"ops"`
	Errors     int64  `json:"errors"`
	GaveUp     int64  `json:"gave_up,omitempty"`  // contended acquires whose retries ran out (repeated)
	Overlaps   int64  `json:"overlaps,omitempty"` // two holders at once: must stay 0
	FirstError string `json:"first_error,omitempty"`
}

// Meta describes the run.
type Meta struct {
	When         string `json:"when"`
	Quick        bool   `json:"quick"`
	Runs         int    `json:"runs"`
	Elapsed      string `json:"elapsed"`
	GoVersion    string `json:"go"`
	CPUs         int    `json:"cpus"`
	RedisVersion string `json:"redis_server"`
	Commit       string `json:"commit"` // of the library measured; "+dirty" when its files differ from it
	// CommitEnd is set when the library's HEAD or working tree changed
	// while the run went on (others commit in the same tree): the binary
	// measured was built from Commit.
	CommitEnd string `json:"commit_end,omitempty"`
	// ServerSide is what the server pays per lock+unlock and for distinct
	// keys locked once, measured after the timed cases (serverside.go).
	ServerSide []ServerSide `json:"server_side,omitempty"`
	// UsedMemory is each server's used_memory once the timed cases were
	// over, before the server side figures.
	UsedMemory []int64 `json:"used_memory_after_runs,omitempty"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute
	// averages when measuring began and ended.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
}

// loadAvg returns the 1, 5 and 15 minute load averages, "" where there are
// none (not Linux).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// libraryCommit names the library's commit at root, with "+dirty" when
// tracked files outside bench/ and docs/ have uncommitted changes.
func libraryCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench", ":!docs").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

func newResult(kind string, s subject, c int) Result {
	r := Result{Case: kind, Library: s.library, Strategy: s.strategy, Variant: s.variant, Client: s.client, Nodes: s.nodes, Concurrency: c}
	r.ID = fmt.Sprintf("%s/%s/c=%d", kind, s.name(), c)
	return r
}

func f(v float64) *float64 { return &v }

func us(d time.Duration) *float64 { return f(float64(d) / float64(time.Microsecond)) }

func ms(d time.Duration) *float64 { return f(float64(d) / float64(time.Millisecond)) }

// fillXRTT divides each c=1 latency by its client's floor p50 of the same run.
func fillXRTT(rs []Result) {
	floor := map[string]float64{}
	for _, r := range rs {
		if r.Case == "floor" && r.Concurrency == 1 && r.P50us != nil {
			floor[r.Client] = *r.P50us
		}
	}
	for i := range rs {
		r := &rs[i]
		base, ok := floor[r.Client]
		if !ok || base == 0 || r.P50us == nil {
			continue
		}
		r.XRTT = f(*r.P50us / base)
		r.XRTTp99 = f(*r.P99us / base)
	}
}

// medians merges runs: each figure is its median over the runs, counts are
// summed.
func medians(runs [][]Result) []Result {
	if len(runs) == 1 {
		return runs[0]
	}
	out := slices.Clone(runs[0])
	for i := range out {
		o := &out[i]
		var all []Result
		for _, run := range runs {
			for _, r := range run {
				if r.ID == o.ID {
					all = append(all, r)
				}
			}
		}
		fields := func(r *Result) []**float64 {
			return []**float64{&r.OpsPerS, &r.P50us, &r.P99us, &r.XRTT, &r.XRTTp99, &r.AllocsPerOp, &r.BytesPerOp, &r.ClientCPUus, &r.ServerCPUus,
				&r.AcquisitionsPerS, &r.SelfShare, &r.MaxShare, &r.MinShare, &r.WaitP50ms, &r.WaitP99ms, &r.WaitMaxms, &r.GapP50ms, &r.GapP99ms, &r.HoldMeanms, &r.Busy}
		}
		dst := fields(o)
		for k := range dst {
			var vs []float64
			for j := range all {
				if p := *fields(&all[j])[k]; p != nil {
					vs = append(vs, *p)
				}
			}
			if len(vs) > 0 {
				*dst[k] = f(median(vs))
			}
		}
		o.Ops, o.Errors, o.GaveUp, o.Overlaps = 0, 0, 0, 0
		for _, r := range all {
			o.Ops += r.Ops
			o.Errors += r.Errors
			o.GaveUp += r.GaveUp
			o.Overlaps += r.Overlaps
			if o.FirstError == "" {
				o.FirstError = r.FirstError
			}
		}
	}
	return out
}

func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func goVersion() string { return runtime.Version() }

func cpus() int { return runtime.NumCPU() }

func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, w := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(w, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

// progress keeps one status line on stderr: rewritten in place on a
// terminal, one line per step otherwise.
type progress struct {
	began time.Time
	tty   bool
	mu    sync.Mutex
	phase string
	msg   string
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newProgress(began time.Time) *progress {
	p := &progress{began: began, stop: make(chan struct{})}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
		p.wg.Go(p.loop)
	}
	return p
}

// set shows phase and detail; off a terminal only a new phase is printed.
func (p *progress) set(phase, detail string) {
	p.mu.Lock()
	newPhase := phase != p.phase
	p.phase, p.msg = phase, phase+"  "+detail
	p.mu.Unlock()
	if p.tty {
		p.draw()
	} else if newPhase {
		fmt.Fprintf(os.Stderr, "%6.1fs  %s\n", time.Since(p.began).Seconds(), phase)
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stderr, "\r\033[K%6.1fs  %s", time.Since(p.began).Seconds(), p.msg)
}

func (p *progress) loop() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *progress) done() {
	p.once.Do(func() {
		close(p.stop)
		p.wg.Wait()
		if p.tty {
			fmt.Fprint(os.Stderr, "\r\033[K")
		}
	})
}
