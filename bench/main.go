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
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// settings bound every loop in count and in time.
type settings struct {
	warm      int           // unmeasured ops before c=1
	serialOps int           // c=1: at most this many ops…
	serialDur time.Duration // …or this long
	parWarm   time.Duration // c=64: unmeasured warm-up
	parDur    time.Duration // c=64: measured window
	parOps    int64         // c=64: per-goroutine cap
	contDur   time.Duration // contention window
}

var (
	full  = settings{warm: 300, serialOps: 5000, serialDur: 3 * time.Second, parWarm: 300 * time.Millisecond, parDur: 3 * time.Second, parOps: 1 << 20, contDur: 5 * time.Second}
	quick = settings{warm: 100, serialOps: 1000, serialDur: 500 * time.Millisecond, parWarm: 150 * time.Millisecond, parDur: 600 * time.Millisecond, parOps: 1 << 18, contDur: time.Second}
)

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
		only    = flag.String("only", "", "run only cases whose name matches this regexp")
	)
	flag.Parse()
	if err := run(*quickF, *runs, *jsonOut, *svgOut, *bin, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(isQuick bool, runs int, jsonOut, svgOut, bin, only string) error {
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	began := time.Now()
	prog := newProgress(began)
	defer prog.done()

	prog.set("starting %d redis-server processes", serverCount)
	servers, err := startServers(ctx, bin, serverCount)
	if err != nil {
		return err
	}
	defer stopServers(servers)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}

	unc, cont := uncontendedSubjects(), contentionSubjects()
	if filter != nil {
		unc, cont = keep(unc, filter), keep(cont, filter)
	}
	steps := runs * (2*len(unc) + len(cont))
	step := 0
	var all [][]Result
	for r := range runs {
		var res []Result
		for _, s := range unc {
			for _, c := range []int{1, parallelism} {
				step++
				prog.set("run %d/%d  [%d/%d]  %s c=%d", r+1, runs, step, steps, s.name(), c)
				out, err := measureUncontended(ctx, s, addrs, c, set, fmt.Sprintf("%d", r))
				if ctx.Err() != nil {
					return errors.New("interrupted")
				}
				if err != nil {
					return fmt.Errorf("%s c=%d: %w", s.name(), c, err)
				}
				res = append(res, out)
			}
		}
		for _, s := range cont {
			step++
			prog.set("run %d/%d  [%d/%d]  contention %s", r+1, runs, step, steps, s.name())
			out, err := measureContended(ctx, s, addrs, set, fmt.Sprintf("%d", r))
			if ctx.Err() != nil {
				return errors.New("interrupted")
			}
			if err != nil {
				return fmt.Errorf("contention %s: %w", s.name(), err)
			}
			res = append(res, out)
		}
		fillXRTT(res)
		all = append(all, res)
	}
	prog.done()
	results := medians(all)
	meta := Meta{
		Quick: isQuick, Runs: runs, Elapsed: time.Since(began).Round(time.Millisecond).String(),
		GoVersion: goVersion(), CPUs: cpus(), RedisVersion: redisVersion(bin), When: time.Now().UTC().Format(time.RFC3339),
	}
	printTable(os.Stdout, results, meta)
	checks := evaluate(results)
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

func measureUncontended(ctx context.Context, s subject, addrs []string, c int, set settings, run string) (Result, error) {
	in, err := s.setup(ctx, addrs)
	if err != nil {
		return Result{}, err
	}
	defer in.close()
	kind := "lock+unlock"
	if s.library == "floor" {
		kind = "floor"
	}
	res := newResult(kind, s, c)
	prefix := fmt.Sprintf("bench:%s:%s:%s:c%d:", run, s.library, slug(s.name()), c)
	if c == 1 {
		r := measureSerial(ctx, in.op, prefix+"0", set.warm, set.serialOps, set.serialDur)
		res.Ops, res.Errors = int64(r.ops), int64(r.errs)
		res.P50us, res.P99us = us(r.p50), us(r.p99)
		res.AllocsPerOp, res.BytesPerOp = f(r.allocs), f(r.bytes)
		if r.firstErr != nil {
			res.FirstError = r.firstErr.Error()
		}
		return res, nil
	}
	keys := make([]string, c)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	r := measureParallel(ctx, in.op, keys, set.parWarm, set.parDur, set.parOps)
	res.Ops, res.Errors = r.ops, r.errs
	res.OpsPerS = f(r.perSec)
	if r.firstErr != nil {
		res.FirstError = r.firstErr.Error()
	}
	return res, nil
}

func measureContended(ctx context.Context, s subject, addrs []string, set settings, run string) (Result, error) {
	in, err := s.setup(ctx, addrs)
	if err != nil {
		return Result{}, err
	}
	defer in.close()
	res := newResult("contention", s, contenders)
	key := fmt.Sprintf("bench:%s:contention:%s", run, slug(s.name()))
	r := measureContention(ctx, in.acquire, key, contenders, hold, set.contDur)
	res.Ops, res.Errors = int64(r.acquisitions), int64(r.errs)
	res.AcquisitionsPerS = f(r.perSec)
	res.SelfShare = f(r.selfShare)
	res.MaxShare, res.MinShare = f(r.maxShare), f(r.minShare)
	res.WaitP50ms, res.WaitP99ms, res.WaitMaxms = ms(r.waitP50), ms(r.waitP99), ms(r.waitMax)
	res.GapP50ms, res.GapP99ms = ms(r.gapP50), ms(r.gapP99)
	res.GaveUp, res.Overlaps = int64(r.failures), int64(r.overlaps)
	if r.firstErr != nil {
		res.FirstError = r.firstErr.Error()
	}
	return res, nil
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
