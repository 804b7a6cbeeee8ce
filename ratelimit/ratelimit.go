// Package ratelimit limits how often something happens, across every
// process that shares the servers: at most Rate requests per Per on a key,
// with bursts of up to Burst, judged by the server's clock.
//
// # Algorithm
//
// Each call is one Lua script on one key per server, by the generic cell
// rate algorithm (GCRA): the key holds the limit's theoretical arrival
// time (TAT), the time at which the limit would be full again, in µs of
// the server's clock (TIME, read in the script; no client's clock is
// compared with it). A request of n is admitted when TAT + n × Per/Rate
// is at most Burst × Per/Rate ahead of now, and then moves TAT by
// n × Per/Rate; a refusal writes nothing. The key expires when TAT
// passes, so a limit at rest keeps nothing on the server, and a busy one
// keeps one small string (on a quorum, and a short log). GCRA was chosen over a sliding window: it is
// exact where a window log must keep one entry per admission (memory
// growing with the rate) and a window counter only approximates; it
// answers when to retry and when the limit is full again from its one
// number; and its bound (below) holds for every window, not only the
// windows aligned on the counter's.
//
// # Single server and quorum
//
// New takes one node or several. On one node (a standalone server, a
// Cluster, a Sentinel-managed master) the node decides. On several
// independent masters the Limiter asks them all at once, each call bounded
// by the node timeout (option.NodeTimeout), and admits a request when a
// majority of them (N/2+1) admit it; a node that fails or does not answer
// in time counts as a refusal. So the limit holds, and keeps admitting,
// through the loss of a minority of the nodes.
//
// After the decision, the nodes that answered otherwise are brought in
// line with it, so that every node counts the same admissions. A request
// the majority refused is refunded on the nodes that admitted it; a
// request the majority admitted is charged on the nodes that refused it,
// moving their TAT on as an admission would, but never past an empty
// limit. For the refunds, each node of a quorum keeps beside TAT a log of
// its latest admissions and charges (those of the last three node
// timeouts, at most 32; LogKeyOf): a refund removes its admission from the
// log and replays TAT from the rest, so the node's state is exactly what
// it would be had the request never come, whatever was admitted or
// charged after it. (A blind refund, TAT − n × Per/Rate, could hand back
// more than the request took, since GCRA moves TAT to max(TAT, now)
// before adding; an exact undo of the latest admission alone, as before
// the log, was skipped whenever a later admission stood on it, which
// under contention was nearly always: the refused requests' budget stayed
// spent, the nodes drifted to full, and five nodes with 48 callers
// admitted a quarter to a half of the ideal.) Neither a refund nor a
// charge can make a node admit more than it would have: the bound below
// holds as it would without them (proof below). Without them, nodes that
// took different requests near the limit drifted apart. A refund of an
// admission no longer logged, or a refund or charge that fails, is
// skipped: under-admission, never over. Either costs one more round trip
// to the nodes that disagreed, after the call returns.
//
// # Over-admission bound
//
// Let I = Per/Rate rounded up to a µs and B = Burst. On one server whose
// key is not lost, at most B + ⌊T/I⌋ ≤ B + Rate×T/Per requests are
// admitted in any window of T of the server's clock: the first admission
// in the window sets TAT at least I past its start, each other one adds I,
// and the last one needs TAT ≤ its time + B×I. Each loss of the key in
// the window (a restart without persistence, a failover to a replica that
// missed the latest writes, an eviction) adds up to B. A server clock that
// jumps forward by J counts as J more of T; one that runs fast by ε
// stretches T to (1+ε)T.
//
// With refunds and charges it holds on each node of a quorum as well, by
// this invariant: for every time a, TAT ≥ a + I × N(a), N(a) being the
// requests (weighted by n) the node admitted at or after a and did not
// refund, whenever N(a) ≥ 1. An admission at t sets max(TAT, t) + n×I,
// at least TAT + n×I and at least t + n×I, so the invariant holds after
// it for every a; a charge, and a lost key (read as now, past the TAT that
// expired), only move TAT later; and a refund sets TAT to the replay of
// the log's base through its other entries, where the base met the
// invariant for the admissions folded into it (which can no longer be
// refunded) and each replayed step is an admission's or a charge's, which
// keep it. Now take the k admissions of a window [a, b] that stand at its
// end, the last at t: when it was admitted TAT became at most t + B×I,
// and, by the invariant then (every one of the k stood then too), at
// least a + k×I; so k ≤ B + (t − a)/I.
//
// On N nodes with majority M = N/2+1, every admitted request was admitted
// by at least M nodes, and node j keeps at most B×(1+R_j) + ⌊T_j/I⌋
// admissions in the window (a refunded one is as if it never came), R_j
// being its losses and T_j the window by its clock. So at most
//
//	⌊(Σ_j (B×(1+R_j) + ⌊T_j/I⌋)) / M⌋
//
// requests are admitted, the sum running over the nodes up at some time in
// the window: with equal clocks and no loss, ⌊N×(B + ⌊T/I⌋)/M⌋, 5/3 of the
// single bound for N = 5, and exactly the single bound while only M nodes
// are up. The excess over the single bound needs the nodes to disagree:
// concurrent requests reaching the nodes in different orders near the
// limit. Only the rate of a node's clock matters, never its offset from
// the others': each node judges by its own clock alone. docs/ratelimit.md
// states the bound with the faults, and the tests check it per sliding
// window under faults.
//
// # Keys
//
// A limit's key is "dlock:rate:{KEY}" (see KeyOf), tagged so that it works
// on a Cluster; a quorum's log is "dlock:rate:{KEY}:log" (LogKeyOf), in
// the same slot. One key holds one limit: Limiters of different Limits on
// the same key share its TAT, each judging by its own Limit.
package ratelimit

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

// The scripts, in lua/ with their keys, arguments and replies; each
// holds the functions of log.lua (the state of the limit's keys) and of
// the engine's library that it calls.
var (
	// gcraScript: KEYS the limit's keys (keysOf); ARGV the interval µs,
	// the tolerance µs, n, how long to keep the admission refundable µs
	// (0: no log). Replies {admitted 1/0, left, µs until retry, µs until
	// full, and when admitted its id}.
	gcraScript = lua.Script(lua.Spec{Name: "ratelimit/gcra", FS: luaFS, Lib: lib, Body: []string{"gcra.lua"}})
	// refundScript: KEYS the limit's keys; ARGV the admission's id, the
	// keep µs. Replies 1 when it undid the admission.
	refundScript = lua.Script(lua.Spec{Name: "ratelimit/refund", FS: luaFS, Lib: lib, Body: []string{"refund.lua"}})
	// chargeScript: KEYS the limit's keys; ARGV n × the interval µs, the
	// tolerance µs, the keep µs. Replies 1.
	chargeScript = lua.Script(lua.Spec{Name: "ratelimit/charge", FS: luaFS, Lib: lib, Body: []string{"charge.lua"}})
)

//go:embed lua
var luaFS embed.FS

// lib is the package's functions a script holds when it calls them.
var lib = []string{"log.lua"}

// MaxRefill is the longest a limit may take to refill its burst,
// Burst × Per / Rate.
const MaxRefill = 366 * 24 * time.Hour

// ErrClosed is returned by the calls of a Limiter after Close.
var ErrClosed = errors.New("ratelimit: closed")

// ErrNoQuorum matches the error of a quorum call that too many nodes
// failed to answer for a majority to admit it.
var ErrNoQuorum = errors.New("ratelimit: too few nodes answered")

// ErrCallsRunning matches Close's error when calls to slow nodes were
// still running when it gave up waiting for them.
var ErrCallsRunning = errors.New("ratelimit: calls still running")

// Limit is Rate requests per Per, in bursts of up to Burst. A zero Burst
// means Rate.
type Limit struct {
	Rate  int
	Per   time.Duration
	Burst int
}

// String writes the limit as "10/1s burst 10".
func (l Limit) String() string {
	return strconv.Itoa(l.Rate) + "/" + l.Per.String() + " burst " + strconv.Itoa(l.burst())
}

func (l Limit) burst() int {
	if l.Burst == 0 {
		return l.Rate
	}
	return l.Burst
}

// Check returns an *lease.ArgError naming the field and its rule when l
// breaks one, as New does: Rate >= 1, Per > 0, Burst >= 0; the interval
// Per/Rate at least 1 µs (at most one request per µs of Per); and the
// refill, Burst × Per/Rate (Per itself for a zero Burst), at most
// MaxRefill, and so the interval too. Every limit Check admits works on
// the servers: the script's µs, and the key's expiry, stay far within
// what they count.
func (l Limit) Check() error {
	switch {
	case l.Rate < 1:
		return &lease.ArgError{Arg: "limit.Rate", Value: l.Rate, Rule: "must be >= 1"}
	case l.Per <= 0:
		return &lease.ArgError{Arg: "limit.Per", Value: l.Per, Rule: "must be > 0"}
	case l.Burst < 0:
		return &lease.ArgError{Arg: "limit.Burst", Value: l.Burst, Rule: "must be >= 0 (0 means Rate)"}
	case int64(l.Per/time.Microsecond) < int64(l.Rate):
		return &lease.ArgError{Arg: "limit.Rate", Value: l.Rate,
			Rule: "must be at most one per µs of Per (" + l.Per.String() + "): the interval Per/Rate must be at least 1µs"}
	}
	const maxUs = int64(MaxRefill / time.Microsecond)
	iv := l.intervalUs()
	if iv > maxUs {
		return &lease.ArgError{Arg: "limit.Per", Value: l.Per,
			Rule: "must make the interval Per/Rate at most ratelimit.MaxRefill (" + MaxRefill.String() + ")"}
	}
	if int64(l.burst()) > maxUs/iv {
		if l.Burst == 0 {
			return &lease.ArgError{Arg: "limit.Per", Value: l.Per,
				Rule: "must be at most ratelimit.MaxRefill (" + MaxRefill.String() + ") with Burst 0 (Rate): Burst × Per/Rate is the refill"}
		}
		return &lease.ArgError{Arg: "limit.Burst", Value: l.Burst,
			Rule: "must refill within ratelimit.MaxRefill (Burst × Per / Rate <= " + MaxRefill.String() + ")"}
	}
	return nil
}

// interval returns Per/Rate rounded up to a µs: rounding up never admits
// more than Rate per Per. l must pass Check.
func (l Limit) interval() time.Duration { return time.Duration(l.intervalUs()) * time.Microsecond }

// intervalUs returns Per/Rate in µs, rounded up, without overflow:
// ⌈⌈Per/Rate⌉ ns / 1000⌉ = ⌈Per / (Rate × 1000)⌉, and Rate × 1000 fits
// when Rate is at most Per in µs (Check). Rate and Per must be positive.
func (l Limit) intervalUs() int64 {
	per, rate := int64(l.Per), int64(l.Rate)
	if rate > math.MaxInt64/1000 {
		// Only for a limit Check refuses: Rate above Per in µs.
		return 1
	}
	d := rate * 1000
	q := per / d
	if per%d != 0 {
		q++
	}
	return q
}

// Limiter applies one Limit to any number of keys. It is safe for
// concurrent use.
type Limiter struct {
	nodes    []node.Node
	limit    Limit
	majority int
	timeout  time.Duration
	observer observe.Observer
	args     [3]string // the interval, the tolerance and the keep, µs
	interval int64     // µs

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup // calls to nodes still running after their Allow returned

	// What the nodes' calls after a decision did, for the tests'
	// measurements: refunds made and skipped, charges made.
	refunded, unrefunded, charged atomic.Int64
}

// New returns a Limiter of limit on nodes: one node, or several
// independent masters that decide by majority. It uses the nodes but does
// not own them: Close leaves them open. opts may set option.NodeTimeout,
// which bounds each call to one node (by default 100ms on several nodes;
// on one, the caller's context alone bounds the call), and
// option.Observer, which hears each call (Allow, AllowN, Wait, WaitN) as
// one observe.RateDecided event when it ends: its key, its outcome
// (observe.RateOutcome), its time and its error, on the caller's
// goroutine. Bad arguments, and options that do not apply, are reported
// as an *lease.ArgError naming the argument and the rule.
func New(nodes []node.Node, limit Limit, opts ...option.Option) (*Limiter, error) {
	if len(nodes) == 0 {
		return nil, &lease.ArgError{Arg: "nodes", Value: len(nodes), Rule: "must hold at least one node"}
	}
	for i, n := range nodes {
		if n == nil {
			return nil, &lease.ArgError{Arg: "nodes", Value: i, Rule: "must not hold a nil node (index given)"}
		}
	}
	if err := limit.Check(); err != nil {
		return nil, err
	}
	cfg, err := settings.New(settings.RateLimit, opts)
	if err != nil {
		return nil, err
	}
	timeout := cfg.RateNodeTimeout(len(nodes))
	limit.Burst = limit.burst()
	iv := limit.interval()
	return &Limiter{
		nodes:    nodes,
		limit:    limit,
		majority: len(nodes)/2 + 1,
		timeout:  timeout,
		observer: cfg.Observer,
		interval: iv.Microseconds(),
		args: [3]string{
			strconv.FormatInt(iv.Microseconds(), 10),
			strconv.FormatInt(iv.Microseconds()*int64(limit.Burst), 10),
			strconv.FormatInt(keepFor(len(nodes), timeout), 10),
		},
	}, nil
}

// keepFor returns how long, in µs, the nodes of a quorum keep an
// admission refundable: three node timeouts, the longest a refund comes
// after its admission (the majority's answers, then the refund, each
// bounded by the node timeout) with room to spare; 0, no log, on one
// node.
func keepFor(nodes int, timeout time.Duration) int64 {
	if nodes == 1 {
		return 0
	}
	return 3 * timeout.Microseconds()
}

// Limit returns the Limiter's limit, its Burst set.
func (l *Limiter) Limit() Limit { return l.limit }

// Majority returns how many nodes must admit a request: N/2+1, 1 on one
// node.
func (l *Limiter) Majority() int { return l.majority }

// KeyOf returns the server key of the limit on key: its TAT. A quorum
// keeps beside it, while refunds may come, the log of its latest
// admissions, LogKeyOf.
func KeyOf(key string) string { return keyname.Rate(key) }

// LogKeyOf returns the server key of the log of the limit on key: KeyOf
// and ":log", in the same hash slot.
func LogKeyOf(key string) string { return keyname.Rate(key) + ":log" }

// keysOf returns the scripts' KEYS for the limit on key.
func keysOf(key string) []string { return []string{KeyOf(key), LogKeyOf(key)} }

// Close makes later calls fail with ErrClosed and waits for the calls to
// slow nodes that outlived their Allow (a quorum returns as soon as a
// majority decided), for at most the node timeout plus 5 s: a call to a
// hung server ends only when its client gives up. It does not close the
// nodes.
func (l *Limiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.calls.Wait()
		close(done)
	}()
	t := time.NewTimer(l.timeout + 5*time.Second)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		names := make([]string, len(l.nodes))
		for i, n := range l.nodes {
			names[i] = n.String()
		}
		return fmt.Errorf("%w on one of %s", ErrCallsRunning, strings.Join(names, ", "))
	}
}
