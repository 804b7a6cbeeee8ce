package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/single"
	"github.com/redis/go-redis/v9"
)

// What the server pays, measured on the first server alone with one
// subject at a time, after the timed cases:
//
//   - server time: the µs of script time (INFO commandstats: EVAL and
//     EVALSHA, with the commands they call) per uncontended lock+unlock,
//     on one key reused and on a new key each time (which the server
//     must create and expire);
//   - idle keys: 100,000 (-quick: 10,000) distinct keys locked once each
//     with the library's default options, 64 at a time: the keys and
//     used_memory just after, and how long until the keys are gone and
//     used_memory is back within 1 MB of before (polled each second, for
//     at most three minutes).

// ServerSide is one subject's figures.
type ServerSide struct {
	Subject      string   `json:"subject"`
	Pairs        int      `json:"pairs"`
	SameKeyUs    *float64 `json:"server_us_per_pair_same_key"`
	NewKeyUs     *float64 `json:"server_us_per_pair_new_keys"`
	Keys         int      `json:"distinct_keys"`
	KeysAfter    int64    `json:"keys_after_release"`
	MemBefore    int64    `json:"used_memory_before"`
	MemAfter     int64    `json:"used_memory_after_release"`
	GoneSeconds  *float64 `json:"seconds_until_gone,omitempty"` // nil: not gone within the wait
	MemWhenGone  int64    `json:"used_memory_when_gone"`
	KeysWhenGone int64    `json:"keys_when_gone"`
}

// serverSideSubjects are measured with their defaults (the idle keys) on
// go-redis, dlock on valkey-go as well.
func serverSideSubjects() []subject {
	def := func(client string) func(context.Context, []string) (*instance, error) {
		return func(_ context.Context, addrs []string) (*instance, error) {
			ns, closeAll, err := nodes(client, addrs[:1])
			if err != nil {
				return nil, err
			}
			lk, err := single.New(ns[0]) // every default
			if err != nil {
				closeAll()
				return nil, err
			}
			return dlockInstance(lk, closeAll), nil
		}
	}
	return []subject{
		{library: "dlock", strategy: "single", client: "go-redis", nodes: 1, setup: def("go-redis")},
		{library: "dlock", strategy: "single", client: "valkey-go", nodes: 1, setup: def("valkey-go")},
		{library: "redislock", strategy: "single", client: "go-redis", nodes: 1,
			setup: func(_ context.Context, a []string) (*instance, error) {
				return redislockInstance(a[:1], 30*time.Second, time.Millisecond)
			}},
	}
}

// serverSide measures every subject in turn on addr, flushing it first.
func serverSide(ctx context.Context, addr string, quick bool, prog *progress) ([]ServerSide, error) {
	pairs, keys := 20000, 100000
	if quick {
		pairs, keys = 2000, 10000
	}
	c := newGoRedis(addr)
	defer c.Close()
	var out []ServerSide
	for _, s := range serverSideSubjects() {
		prog.set("server side", s.name())
		r, err := serverSideOne(ctx, c, addr, s, pairs, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

func serverSideOne(ctx context.Context, c *redis.Client, addr string, s subject, pairs, keys int) (ServerSide, error) {
	r := ServerSide{Subject: s.name(), Pairs: pairs, Keys: keys}
	if err := c.FlushAll(ctx).Err(); err != nil {
		return r, err
	}
	inst, err := s.setup(ctx, []string{addr})
	if err != nil {
		return r, err
	}
	defer inst.close()
	if err := inst.op(ctx, "bench:warm"); err != nil { // dial, load scripts
		return r, err
	}
	timed := func(key func(i int) string) (*float64, error) {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return nil, err
		}
		for i := range pairs {
			if err := inst.op(ctx, key(i)); err != nil {
				return nil, err
			}
		}
		us, err := commandMicros(ctx, c)
		if err != nil {
			return nil, err
		}
		return f(round(us/float64(pairs), 2)), nil
	}
	if r.SameKeyUs, err = timed(func(int) string { return "bench:same" }); err != nil {
		return r, err
	}
	if r.NewKeyUs, err = timed(func(i int) string { return "bench:new:" + strconv.Itoa(i) }); err != nil {
		return r, err
	}

	if err := c.FlushAll(ctx).Err(); err != nil {
		return r, err
	}
	_ = c.Do(ctx, "MEMORY", "PURGE").Err()
	if r.MemBefore, err = usedMemory(ctx, c); err != nil {
		return r, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(keys) || ctx.Err() != nil {
					return
				}
				if err := inst.op(ctx, "bench:distinct:"+strconv.FormatInt(i, 10)); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return r, err
	}
	released := time.Now()
	if r.KeysAfter, err = c.DBSize(ctx).Result(); err != nil {
		return r, err
	}
	if r.MemAfter, err = usedMemory(ctx, c); err != nil {
		return r, err
	}
	for deadline := released.Add(3 * time.Minute); ; {
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return r, err
		}
		m, err := usedMemory(ctx, c)
		if err != nil {
			return r, err
		}
		r.KeysWhenGone, r.MemWhenGone = n, m
		if n == 0 && m <= r.MemBefore+1<<20 {
			r.GoneSeconds = f(round(time.Since(released).Seconds(), 1))
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return r, nil
}

// commandMicros is the µs the server spent running scripts since its
// stats were reset (INFO commandstats: EVAL and EVALSHA, whose time holds
// that of the commands they call, which commandstats counts a second time
// under their own names). Every subject here locks and unlocks by scripts
// alone.
func commandMicros(ctx context.Context, c *redis.Client) (float64, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || name != "cmdstat_eval" && name != "cmdstat_evalsha" {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				u, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("commandstats %q: %w", line, err)
				}
				total += u
			}
		}
	}
	return total, nil
}

// usedMemory is the server's used_memory, bytes.
func usedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	s, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// printServerSide prints serverSide's figures.
func printServerSide(w io.Writer, ss []ServerSide) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintln(w, "Server side, one subject at a time on one server: script µs per uncontended lock+unlock (INFO commandstats: EVAL, EVALSHA), and distinct keys locked once each with the defaults.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subject | µs/pair, one key | µs/pair, new keys | distinct keys | keys after release | used_memory before → after | gone after |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	for _, s := range ss {
		gone := "not within 3 min: " + strconv.FormatInt(s.KeysWhenGone, 10) + " keys, " + mb(s.MemWhenGone)
		if s.GoneSeconds != nil {
			gone = strconv.FormatFloat(*s.GoneSeconds, 'f', 1, 64) + " s"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %s → %s | %s |\n", s.Subject, num(s.SameKeyUs, 2), num(s.NewKeyUs, 2),
			s.Keys, s.KeysAfter, mb(s.MemBefore), mb(s.MemAfter), gone)
	}
	fmt.Fprintln(w)
}

func mb(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 2, 64) + " MB" }

// serverSideChecks holds dlock's figures to its targets: at most 9 µs of
// server time per uncontended lock+unlock (one key, go-redis), and
// distinct keys locked once gone, used_memory back within 1 MB, within 2
// minutes of their release.
func serverSideChecks(ss []ServerSide) []Check {
	var out []Check
	for _, s := range ss {
		if !strings.HasPrefix(s.Subject, "dlock ") {
			continue
		}
		if s.SameKeyUs != nil && strings.HasSuffix(s.Subject, " go-redis") {
			out = append(out, atMostCheck("server µs per uncontended lock+unlock <= 9", s.Subject, *s.SameKeyUs, 9, "µs"))
		}
		gone := 3 * 60.0 // not gone within the wait: past it
		if s.GoneSeconds != nil {
			gone = *s.GoneSeconds
		}
		out = append(out, atMostCheck(fmt.Sprintf("%d distinct keys gone, used_memory within 1 MB, <= 120 s after release", s.Keys), s.Subject, gone, 120, "s"))
	}
	return out
}
