package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// label names a row the way the tables and chart do.
func label(r Result) string {
	s := r.Library
	switch r.Library {
	case "floor":
		s = "EVALSHA floor"
	case "dlock":
		s += " " + r.Strategy
	default:
		if r.Nodes > 1 {
			s += fmt.Sprintf(" (%d nodes)", r.Nodes)
		} else if r.Library == "redsync" {
			s += " (1 node)"
		}
	}
	if r.Library == "dlock" && r.Nodes > 1 {
		s += fmt.Sprintf(" N=%d", r.Nodes)
	}
	return s
}

func num(p *float64, digits int) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.*f", digits, *p)
}

func kilo(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1fk", *p/1000)
}

func pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", *p*100)
}

// uncontendedRows pairs each subject's c=1 and c=64 results.
func uncontendedRows(rs []Result) [][2]*Result {
	var rows [][2]*Result
	idx := map[string]int{}
	for i := range rs {
		r := &rs[i]
		if r.Case == "contention" {
			continue
		}
		k := strings.TrimSuffix(r.ID, fmt.Sprintf("/c=%d", r.Concurrency))
		j, ok := idx[k]
		if !ok {
			j = len(rows)
			idx[k] = j
			rows = append(rows, [2]*Result{})
		}
		if r.Concurrency == 1 {
			rows[j][0] = r
		} else {
			rows[j][1] = r
		}
	}
	return rows
}

func printTable(w io.Writer, rs []Result, m Meta) {
	fmt.Fprintf(w, "\ndlock %s, %s, %d CPUs, redis-server %s, %d run(s)%s, %s\n", m.Commit, m.GoVersion, m.CPUs, m.RedisVersion, m.Runs, map[bool]string{true: " (quick)"}[m.Quick], m.Elapsed)
	if m.CommitEnd != "" {
		fmt.Fprintf(w, "(the library was at %s when the run ended; the binary was built from %s)\n", m.CommitEnd, m.Commit)
	}
	if m.LoadStart != "" {
		fmt.Fprintf(w, "load average (1, 5, 15 min): %s at start, %s at end\n", m.LoadStart, m.LoadEnd)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Uncontended lock+unlock on distinct keys (floor: one EVALSHA). xRTT: over the same client's floor p50.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | client | c=1 p50 µs | c=1 p99 µs | xRTT p50 | xRTT p99 | c=64 ops/s | c=64 CPU µs/op client+server | allocs/op | B/op | errors |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, row := range uncontendedRows(rs) {
		one, par := row[0], row[1]
		base := one
		if base == nil {
			base = par
		}
		var r1 Result
		if one != nil {
			r1 = *one
		}
		var rp Result
		if par != nil {
			rp = *par
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s+%s | %s | %s | %d |\n",
			label(*base), base.Client, num(r1.P50us, 0), num(r1.P99us, 0), num(r1.XRTT, 2), num(r1.XRTTp99, 2),
			kilo(rp.OpsPerS), num(rp.ClientCPUus, 1), num(rp.ServerCPUus, 1), num(r1.AllocsPerOp, 1), num(r1.BytesPerOp, 0), r1.Errors+rp.Errors)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Contention: %d goroutines on one key, hold %s (time.Sleep; mean as slept: %s). handoff: Release called → next holder's acquire returned.\n\n", contenders, hold, meanHold(rs))
	fmt.Fprintln(w, "| case | client | waiting | acq/s | self_share | max/min share | wait p50 ms | wait p99 ms | wait max ms | handoff p50 ms | handoff p99 ms | lock busy |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rs {
		if r.Case != "contention" {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s/%s | %s | %s | %s | %s | %s | %s |\n",
			label(r), r.Client, r.Variant, num(r.AcquisitionsPerS, 0), pct(r.SelfShare), num(r.MaxShare, 2), num(r.MinShare, 2),
			num(r.WaitP50ms, 2), num(r.WaitP99ms, 1), num(r.WaitMaxms, 0), num(r.GapP50ms, 2), num(r.GapP99ms, 2), pct(r.Busy))
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		if r.Errors > 0 || r.Overlaps > 0 {
			fmt.Fprintf(w, "! %s: %d errors (first: %s), %d overlapping holders\n", r.ID, r.Errors, r.FirstError, r.Overlaps)
		}
	}
}

// Check is one target from the issue, evaluated on this run.
type Check struct {
	Target string  `json:"target"`
	Case   string  `json:"case"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
	Met    bool    `json:"met"`
	// Margin is how far inside (positive) or outside (negative) the limit
	// the value is, as a fraction of the limit.
	Margin float64 `json:"margin"`
}

func find(rs []Result, match func(Result) bool) *Result {
	for i := range rs {
		if match(rs[i]) {
			return &rs[i]
		}
	}
	return nil
}

// atMostCheck holds v to at most limit.
func atMostCheck(target, c string, v, limit float64, unit string) Check {
	return Check{Target: target, Case: c, Value: round(v, 3), Limit: round(limit, 3), Unit: unit, Met: v <= limit, Margin: round((limit-v)/limit, 3)}
}

func atLeastCheck(target, c string, v, limit float64, unit string) Check {
	return Check{Target: target, Case: c, Value: round(v, 3), Limit: round(limit, 3), Unit: unit, Met: v >= limit, Margin: round((v-limit)/limit, 3)}
}

func evaluate(rs []Result) []Check {
	var out []Check
	atMost := func(target, c string, v, limit float64, unit string) {
		out = append(out, atMostCheck(target, c, v, limit, unit))
	}
	atLeast := func(target, c string, v, limit float64, unit string) {
		out = append(out, atLeastCheck(target, c, v, limit, unit))
	}
	get := func(kind, lib, strategy, client string, nodes, c int) *Result {
		return find(rs, func(r Result) bool {
			return r.Case == kind && r.Library == lib && r.Strategy == strategy && r.Client == client && r.Nodes == nodes && r.Concurrency == c
		})
	}
	for _, r := range rs {
		if r.Library == "dlock" && r.KeyBytesMax != nil {
			atMost(fmt.Sprintf("dlock key <= %d B on a server", keyBound), r.ID, *r.KeyBytesMax, keyBound, "B")
		}
	}
	clients := []string{"go-redis", "valkey-go"}
	// The single lock against redislock (on go-redis, the one client it
	// has), in the same run: c=1 latency and c=64 throughput.
	rl1 := get("lock+unlock", "redislock", "single", "go-redis", 1, 1)
	rl64 := get("lock+unlock", "redislock", "single", "go-redis", 1, parallelism)
	for _, t := range []struct {
		client string
		rate   float64
	}{{"go-redis", 2.5}, {"valkey-go", 2.0}} {
		if s := get("lock+unlock", "dlock", "single", t.client, 1, 1); s != nil && rl1 != nil && s.P50us != nil && rl1.P50us != nil {
			atMost(fmt.Sprintf("single c=1 %s p50 <= 1.0x redislock's", t.client), s.ID, *s.P50us / *rl1.P50us, 1.0, "x redislock p50")
		}
		if s := get("lock+unlock", "dlock", "single", t.client, 1, parallelism); s != nil && rl64 != nil && s.OpsPerS != nil && rl64.OpsPerS != nil {
			atLeast(fmt.Sprintf("single c=64 %s >= %gx redislock ops/s", t.client, t.rate), s.ID, *s.OpsPerS / *rl64.OpsPerS, t.rate, "x redislock")
		}
	}
	if s := get("lock+unlock", "dlock", "single", "valkey-go", 1, parallelism); s != nil && s.OpsPerS != nil {
		if fl := get("floor", "floor", "evalsha", "valkey-go", 1, parallelism); fl != nil && fl.OpsPerS != nil {
			atLeast("single c=64 valkey-go >= 0.8x the valkey-go EVALSHA pair floor", s.ID, *s.OpsPerS/(*fl.OpsPerS/2), 0.8, "x floor/2")
		}
	}
	rs1 := get("lock+unlock", "redsync", "redlock", "go-redis", 5, 1)
	rs64 := get("lock+unlock", "redsync", "redlock", "go-redis", 5, parallelism)
	for _, cl := range clients {
		for _, t := range []struct {
			strategy, what   string
			latency, opsRate float64
		}{{"quorum-notoken", "no tokens", 0.85, 3.5}, {"quorum", "with tokens", 1.15, 2.5}} {
			if q := get("lock+unlock", "dlock", t.strategy, cl, 5, 1); q != nil && rs1 != nil && q.P50us != nil && rs1.P50us != nil {
				atMost(fmt.Sprintf("quorum N=5 %s c=1 <= %gx redsync 5-node latency", t.what, t.latency), q.ID, *q.P50us / *rs1.P50us, t.latency, "x redsync p50")
			}
			if q := get("lock+unlock", "dlock", t.strategy, cl, 5, parallelism); q != nil && rs64 != nil && q.OpsPerS != nil && rs64.OpsPerS != nil {
				atLeast(fmt.Sprintf("quorum N=5 %s c=64 >= %gx redsync 5-node ops/s", t.what, t.opsRate), q.ID, *q.OpsPerS / *rs64.OpsPerS, t.opsRate, "x redsync ops/s")
			}
		}
	}
	for _, r := range rs {
		if r.Library != "dlock" || r.Case != "lock+unlock" || r.Concurrency != 1 || r.AllocsPerOp == nil {
			continue
		}
		switch {
		case r.Strategy == "single" && r.Client == "go-redis":
			atMost("allocs/op single go-redis <= 12", r.ID, *r.AllocsPerOp, 12, "allocs/op")
		case r.Strategy == "single":
			atMost("allocs/op single valkey-go <= 6", r.ID, *r.AllocsPerOp, 6, "allocs/op")
		case strings.HasPrefix(r.Strategy, "quorum") && r.Client == "valkey-go":
			atMost("allocs/op quorum valkey-go <= 60", r.ID, *r.AllocsPerOp, 60, "allocs/op")
		}
	}
	out = append(out, claimsChecks(rs)...)
	out = append(out, ratelimitChecks(rs)...)
	for _, r := range rs {
		if r.Library != "dlock" || r.Case != "contention" || r.AcquisitionsPerS == nil {
			continue
		}
		atMost("contention: fair turns, no goroutine > 1.05x fair share", r.ID, *r.MaxShare, 1.05, "x fair share")
		if r.Strategy == "single" {
			atMost("contention single: handoff p50 <= 0.04 ms", r.ID, *r.GapP50ms, 0.04, "ms")
			atMost("contention single: wait p99 <= 11 ms", r.ID, *r.WaitP99ms, 11, "ms")
		} else {
			atMost("contention quorum: handoff p50 <= 0.3 ms", r.ID, *r.GapP50ms, 0.3, "ms")
			atLeast("contention quorum: >= 500 acq/s", r.ID, *r.AcquisitionsPerS, 500, "acq/s")
		}
	}
	return out
}

func printChecks(w io.Writer, cs []Check) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "Targets:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | target | case | measured | limit | margin |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|")
	for _, c := range cs {
		mark := "MISS"
		if c.Met {
			mark = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.3g %s | %.3g | %+.0f%% |\n", mark, c.Target, c.Case, c.Value, c.Unit, c.Limit, c.Margin*100)
	}
	fmt.Fprintln(w)
}

func writeJSON(path string, m Meta, rs []Result, cs []Check) error {
	for i := range rs {
		for _, p := range []**float64{&rs[i].OpsPerS, &rs[i].P50us, &rs[i].P99us, &rs[i].XRTT, &rs[i].XRTTp99, &rs[i].AllocsPerOp, &rs[i].BytesPerOp, &rs[i].ClientCPUus, &rs[i].ServerCPUus,
			&rs[i].AcquisitionsPerS, &rs[i].SelfShare, &rs[i].MaxShare, &rs[i].MinShare, &rs[i].WaitP50ms, &rs[i].WaitP99ms, &rs[i].WaitMaxms, &rs[i].GapP50ms, &rs[i].GapP99ms, &rs[i].HoldMeanms, &rs[i].Busy} {
			if *p != nil {
				*p = f(round(**p, 3))
			}
		}
	}
	b, err := json.MarshalIndent(struct {
		Meta    Meta     `json:"meta"`
		Results []Result `json:"results"`
		Targets []Check  `json:"targets"`
	}{m, rs, cs}, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}

func meanHold(rs []Result) string {
	var sum float64
	var n int
	for _, r := range rs {
		if r.HoldMeanms != nil {
			sum += *r.HoldMeanms
			n++
		}
	}
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f ms, so at most %.0f acq/s", sum/float64(n), 1000/(sum/float64(n)))
}
