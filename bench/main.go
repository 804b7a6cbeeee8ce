// Command bench measures dlock side by side with bsm/redislock and
// go-redsync/redsync, in one run, on redis-server processes it starts and
// stops itself, and writes a table (stdout), JSON and an SVG chart.
//
//	cd bench && go run . -quick        # under a minute
//	cd bench && go run . -runs 3       # the published figures: medians of 3 runs
//
// Every latency is also given in xRTT: divided by the p50 of one EVALSHA
// round trip on the same client, measured in the same run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// settings bound every loop in count and in time. Subjects take turns
// (batches, windows), so a burst of load from elsewhere on the machine
// falls on all of them rather than on one.
type settings struct {
	warm       int           // c=1: unmeasured ops per subject
	batch      int           // c=1: ops per subject per turn
	serialOps  int           // c=1: at most this many ops per subject…
	serialDur  time.Duration // …or this much time per subject
	parWarm    time.Duration // c=64: one unmeasured window per subject first
	parWindow  time.Duration // c=64: one turn (30 ms of it unmeasured)
	parRounds  int
	parOps     int64         // c=64: per-goroutine cap per window
	contWindow time.Duration // contention: one turn
	contRounds int
}

var (
	full = settings{warm: 300, batch: 50, serialOps: 5000, serialDur: 3 * time.Second,
		parWarm: 300 * time.Millisecond, parWindow: 330 * time.Millisecond, parRounds: 10, parOps: 1 << 20,
		contWindow: 2500 * time.Millisecond, contRounds: 2}
	quick = settings{warm: 100, batch: 50, serialOps: 1000, serialDur: 500 * time.Millisecond,
		parWarm: 100 * time.Millisecond, parWindow: 230 * time.Millisecond, parRounds: 3, parOps: 1 << 18,
		contWindow: time.Second, contRounds: 1}
)

const parWindowWarm = 30 * time.Millisecond

const (
	parallelism = 64
	contenders  = 8
	hold        = time.Millisecond
	serverCount = 5
)

func main() {
	var (
		quickF  = flag.Bool("quick", false, "short windows (whole run under a minute)")
		runs    = flag.Int("runs", 1, "runs; each figure is the median over runs")
		jsonOut = flag.String("json", "", "JSON output (default docs/results/bench.json at the repository root; bench-quick.json with -quick; \"-\" for none)")
		svgOut  = flag.String("svg", "", "SVG chart output (default docs/results/bench.svg, bench-quick.svg with -quick; \"-\" for none)")
		bin     = flag.String("redis-server", "redis-server", "redis-server binary")
		render  = flag.String("render", "", "measure nothing: print the tables of this JSON file and write -svg from it")
		commit  = flag.String("commit", "", "the library commit measured, for the record (default: from git, +dirty when changed)")
		only    = flag.String("only", "", "run only cases whose name matches this regexp")
		sideF   = flag.Bool("serverside", false, "measure the server side (command µs per lock+unlock, distinct keys until gone; over a minute) with -quick or -only too")
	)
	flag.Parse()
	if *render != "" {
		if err := rerender(*render, defaultOut(*svgOut, "bench.svg")); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	side := *sideF || !*quickF && *only == ""
	if err := run(*quickF, *runs, *jsonOut, *svgOut, *bin, *only, *commit, side); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(isQuick bool, runs int, jsonOut, svgOut, bin, only, commit string, side bool) error {
	if runs < 1 || runs > 9 {
		return fmt.Errorf("-runs %d: want 1..9", runs)
	}
	var filter *regexp.Regexp
	if only != "" {
		var err error
		if filter, err = regexp.Compile(only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	set, suffix := full, ""
	if isQuick {
		set, suffix = quick, "-quick"
	}
	jsonOut = defaultOut(jsonOut, "bench"+suffix+".json")
	svgOut = defaultOut(svgOut, "bench"+suffix+".svg")

	// SIGPIPE too (stdout piped into head, say): otherwise the process dies
	// without running the deferred stop of its servers.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()

	// The commit is read now, not after measuring: `go run` built this
	// binary just before it started, and others may commit meanwhile.
	explicitCommit := commit != ""
	if !explicitCommit {
		commit = libraryCommit(repoRoot())
	}
	loadStart := loadAvg()

	began := time.Now()
	prog := newProgress(began)
	defer prog.done()

	prog.set("starting", fmt.Sprintf("%d redis-server processes", serverCount))
	servers, err := startServers(ctx, bin, serverCount)
	if err != nil {
		return err
	}
	defer stopServers(servers)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
		serverPids = append(serverPids, s.cmd.Process.Pid)
	}

	unc, cont := uncontendedSubjects(), contentionSubjects()
	if filter != nil {
		unc, cont = keep(unc, filter), keep(cont, filter)
	}
	for _, s := range append(slices.Clone(unc), cont...) {
		if s.library == "dlock" && s.nodes > 1 {
			prog.set("priming", "stamping the quorum nodes' lost-data epochs")
			if err := primeQuorum(ctx, addrs); err != nil {
				return fmt.Errorf("priming quorum nodes: %w", err)
			}
			break
		}
	}
	var all [][]Result
	for r := range runs {
		tag := fmt.Sprintf("run %d/%d", r+1, runs)
		res, err := uncontended(ctx, unc, addrs, set, prog, tag, r)
		if err != nil {
			return err
		}
		cres, err := contended(ctx, cont, addrs, set, prog, tag, r)
		if err != nil {
			return err
		}
		res = append(res, cres...)
		fillXRTT(res)
		all = append(all, res)
	}
	results := medians(all)
	used, err := keyMemory(ctx, addrs, results)
	if err != nil {
		return err
	}
	var ss []ServerSide
	if side {
		var err error
		if ss, err = serverSide(ctx, addrs[0], isQuick, prog); err != nil {
			return err
		}
	}
	prog.done()
	meta := Meta{Commit: commit, LoadStart: loadStart, LoadEnd: loadAvg(),
		Quick: isQuick, Runs: runs, Elapsed: time.Since(began).Round(time.Millisecond).String(),
		GoVersion: goVersion(), CPUs: cpus(), RedisVersion: redisVersion(bin), When: time.Now().UTC().Format(time.RFC3339),
		ServerSide: ss, UsedMemory: used,
	}
	if !explicitCommit {
		if end := libraryCommit(repoRoot()); end != commit {
			meta.CommitEnd = end
			fmt.Fprintf(os.Stderr, "bench: the library changed during the run (%s at start, %s at end); the binary measured was built from %s\n", commit, end, commit)
		}
	}
	printTable(os.Stdout, results, meta)
	printMemory(os.Stdout, results, used)
	printServerSide(os.Stdout, ss)
	checks := append(evaluate(results), serverSideChecks(ss)...)
	printChecks(os.Stdout, checks)
	if jsonOut != "" {
		if err := writeJSON(jsonOut, meta, results, checks); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", jsonOut)
	}
	if svgOut != "" {
		if err := writeFile(svgOut, renderSVG(results, meta)); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", svgOut)
	}
	fmt.Fprintf(os.Stderr, "total %s\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

func keep(ss []subject, re *regexp.Regexp) []subject {
	var out []subject
	for _, s := range ss {
		if re.MatchString(s.name()) {
			out = append(out, s)
		}
	}
	return out
}

// defaultOut resolves an output flag: "-" turns it off, "" means
// docs/results/name at the repository root.
func defaultOut(flagVal, name string) string {
	switch flagVal {
	case "-":
		return ""
	case "":
		return filepath.Join(repoRoot(), "docs", "results", name)
	}
	return flagVal
}

// repoRoot is the nearest directory up from here whose go.mod declares the
// library's module; "." when there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/dlockgo/dlock\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// live is a subject set up for one run.
type live struct {
	subject
	*instance
}

func setupAll(ctx context.Context, ss []subject, addrs []string, prog *progress, tag string) ([]live, func(), error) {
	var ls []live
	closeAll := func() {
		for _, l := range ls {
			l.close()
		}
	}
	for _, s := range ss {
		prog.set(tag+"  setting up", s.name())
		in, err := s.setup(ctx, addrs)
		if err != nil {
			closeAll()
			if ctx.Err() != nil {
				return nil, nil, errors.New("interrupted")
			}
			return nil, nil, fmt.Errorf("%s: %w", s.name(), err)
		}
		ls = append(ls, live{s, in})
	}
	return ls, closeAll, nil
}

// turns returns the subjects' indexes in a different rotation each round,
// so no subject always follows the same one.
func turns(n, round int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + round) % n
	}
	return out
}

func uncontended(ctx context.Context, ss []subject, addrs []string, set settings, prog *progress, tag string, run int) ([]Result, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	ls, closeAll, err := setupAll(ctx, ss, addrs, prog, tag)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	key := func(l live, c, i int) string {
		return fmt.Sprintf("bench:%d:%s:c%d:%d", run, slug(l.name()), c, i)
	}

	// c=1: batches in turn, each subject up to serialOps or serialDur of
	// its own time.
	accs := make([]serialAcc, len(ls))
	spent := make([]time.Duration, len(ls))
	for i, l := range ls {
		prog.set(tag+"  c=1 warm-up", l.name())
		var warm serialAcc
		serialBatch(ctx, l.op, key(l, 1, 0), set.warm, &warm)
		accs[i].lat = make([]time.Duration, 0, set.serialOps)
	}
	for round := 0; ctx.Err() == nil; round++ {
		busy := false
		for _, i := range turns(len(ls), round) {
			l, acc := ls[i], &accs[i]
			n := min(set.batch, set.serialOps-len(acc.lat))
			if n <= 0 || spent[i] >= set.serialDur {
				continue
			}
			busy = true
			prog.set(tag+"  c=1 lock+unlock", fmt.Sprintf("%s (%d/%d)", l.name(), len(acc.lat), set.serialOps))
			t0 := time.Now()
			serialBatch(ctx, l.op, key(l, 1, 0), n, acc)
			spent[i] += time.Since(t0)
		}
		if !busy {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}

	// c=64: windows in turn.
	keys := make([][]string, len(ls))
	ops := make([]int64, len(ls))
	elapsed := make([]time.Duration, len(ls))
	cpu := make([]cpuSnap, len(ls))
	errs := make([]int64, len(ls))
	firstErr := make([]error, len(ls))
	for i, l := range ls {
		keys[i] = make([]string, parallelism)
		for k := range keys[i] {
			keys[i][k] = key(l, parallelism, k)
		}
		prog.set(tag+"  c=64 warm-up", l.name())
		measureParallel(ctx, l.op, keys[i], 0, set.parWarm, set.parOps)
	}
	for round := range set.parRounds {
		for _, i := range turns(len(ls), round) {
			prog.set(tag+"  c=64 lock+unlock", fmt.Sprintf("%s (window %d/%d)", ls[i].name(), round+1, set.parRounds))
			r := measureParallel(ctx, ls[i].op, keys[i], parWindowWarm, set.parWindow-parWindowWarm, set.parOps)
			ops[i] += r.ops
			elapsed[i] += r.elapsed
			cpu[i].client += r.cpu.client
			cpu[i].server += r.cpu.server
			errs[i] += r.errs
			if firstErr[i] == nil {
				firstErr[i] = r.firstErr
			}
		}
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}

	var out []Result
	for i, l := range ls {
		kind := "lock+unlock"
		if l.library == "floor" {
			kind = "floor"
		}
		one := newResult(kind, l.subject, 1)
		acc := &accs[i]
		one.Ops, one.Errors = int64(len(acc.lat)), int64(acc.errs)
		if n := len(acc.lat); n > 0 {
			slices.Sort(acc.lat)
			one.P50us, one.P99us = us(quantile(acc.lat, 0.5)), us(quantile(acc.lat, 0.99))
			one.AllocsPerOp = f(float64(acc.mallocs) / float64(n))
			one.BytesPerOp = f(float64(acc.bytes) / float64(n))
			one.ClientCPUus = f(float64(acc.cpu.client) / float64(time.Microsecond) / float64(n))
			one.ServerCPUus = f(float64(acc.cpu.server) / float64(time.Microsecond) / float64(n))
		}
		if acc.firstErr != nil {
			one.FirstError = acc.firstErr.Error()
		}
		par := newResult(kind, l.subject, parallelism)
		par.Ops, par.Errors = ops[i], errs[i]
		if elapsed[i] > 0 {
			par.OpsPerS = f(float64(ops[i]) / elapsed[i].Seconds())
		}
		if ops[i] > 0 {
			par.ClientCPUus = f(float64(cpu[i].client) / float64(time.Microsecond) / float64(ops[i]))
			par.ServerCPUus = f(float64(cpu[i].server) / float64(time.Microsecond) / float64(ops[i]))
		}
		if firstErr[i] != nil {
			par.FirstError = firstErr[i].Error()
		}
		out = append(out, one, par)
	}
	return out, nil
}

func contended(ctx context.Context, ss []subject, addrs []string, set settings, prog *progress, tag string, run int) ([]Result, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	ls, closeAll, err := setupAll(ctx, ss, addrs, prog, tag)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	accs := make([]contentionAcc, len(ls))
	for round := range set.contRounds {
		for _, i := range turns(len(ls), round) {
			l := ls[i]
			prog.set(tag+"  contention", fmt.Sprintf("%s (window %d/%d)", l.name(), round+1, set.contRounds))
			key := fmt.Sprintf("bench:%d:contention:%s", run, slug(l.name()))
			contentionWindow(ctx, l.acquire, key, contenders, hold, set.contWindow, &accs[i])
		}
	}
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	var out []Result
	for i, l := range ls {
		acc := &accs[i]
		r := acc.result()
		res := newResult("contention", l.subject, contenders)
		res.Ops, res.Errors = int64(r.acquisitions), int64(acc.errs)
		res.AcquisitionsPerS = f(r.perSec)
		res.SelfShare = f(r.selfShare)
		res.MaxShare, res.MinShare = f(r.maxShare), f(r.minShare)
		res.WaitP50ms, res.WaitP99ms, res.WaitMaxms = ms(r.waitP50), ms(r.waitP99), ms(r.waitMax)
		res.GapP50ms, res.GapP99ms = ms(r.gapP50), ms(r.gapP99)
		res.HoldMeanms, res.Busy = ms(r.holdMean), f(r.busy)
		res.GaveUp, res.Overlaps = int64(acc.failures), int64(acc.overlaps)
		if acc.firstErr != nil {
			res.FirstError = acc.firstErr.Error()
		}
		out = append(out, res)
	}
	return out, nil
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		}
		return '_'
	}, s)
}

// rerender prints the tables of a JSON file written by an earlier run and
// redraws its chart.
func rerender(path, svgOut string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var in struct {
		Meta    Meta     `json:"meta"`
		Results []Result `json:"results"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	printTable(os.Stdout, in.Results, in.Meta)
	printServerSide(os.Stdout, in.Meta.ServerSide)
	printChecks(os.Stdout, append(evaluate(in.Results), serverSideChecks(in.Meta.ServerSide)...))
	if svgOut == "" {
		return nil
	}
	if err := writeFile(svgOut, renderSVG(in.Results, in.Meta)); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", svgOut)
	return nil
}
