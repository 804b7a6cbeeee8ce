package nemesis

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// Kind names a fault.
type Kind string

// The faults. Every one ends by itself: a server killed is started again, a
// paused one continued, a clock put back, a toxic removed.
const (
	// KillEmpty: SIGKILL, delete the server's RDB and AOF, restart: empty.
	KillEmpty Kind = "kill-empty"
	// KillRDB: SIGKILL an RDB-mode server, restart it from its last
	// snapshot (taken by Snapshot, or by its save schedule), or empty when
	// it has none.
	KillRDB Kind = "kill-rdb"
	// KillAOF: SIGKILL an AOF-mode server (appendfsync everysec), drop
	// what its AOF gained in the last Lose (1-2 s: what an OS crash loses
	// under everysec; a killed process alone loses nothing, its writes sit
	// in the page cache), and restart it from that AOF.
	KillAOF Kind = "kill-aof"
	// Snapshot: BGSAVE, the snapshot a later KillRDB restores.
	Snapshot Kind = "snapshot"
	// Pause: SIGSTOP, SIGCONT after For.
	Pause Kind = "pause"
	// ClockForward: the server's wall clock jumps ahead by Jump, and back
	// after For (an NTP step back).
	ClockForward Kind = "clock-forward"
	// ClockBack: the server's wall clock steps back by Jump, and forward
	// again after For.
	ClockBack Kind = "clock-back"
	// Latency: replies on a link delayed by Latency ± Jitter for For.
	Latency Kind = "latency"
	// Timeout: a link drops every byte in one direction for For, and
	// closes each connection after Delay when Delay is not 0.
	Timeout Kind = "timeout"
	// ResetPeer: a link resets (TCP RST) each connection Delay after its
	// next bytes in one direction, for For: downstream, lost replies.
	ResetPeer Kind = "reset-peer"
	// Failover (single only): SIGKILL the master, REPLICAOF NO ONE on the
	// replica, move the clients' address (and the replication link) to
	// it, then restart the old master as its replica after For and wait
	// for the sync. The roles swap.
	Failover Kind = "failover"
	// HolderPause: a worker's next operation acquires without auto-renew,
	// sleeps For past its lease's end, then writes with its old token: a
	// holder paused by GC or a stopped VM.
	HolderPause Kind = "holder-pause"
	// Break: an operator's break (ForceRelease) of lock key
	// Targets[0], through worker Worker's Locker, whoever holds it (see
	// force.go).
	Break Kind = "break"
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{KillEmpty, KillRDB, KillAOF, Snapshot, Pause, ClockForward, ClockBack,
	Latency, Timeout, ResetPeer, Failover, HolderPause, Break}

// Fault is one scheduled fault.
type Fault struct {
	N    int // its place in the schedule
	Kind Kind
	// At is when it starts, from the start of the fault phase.
	At time.Duration
	// For is how long it lasts: a killed server's downtime, a pause, a
	// clock offset, a toxic; for Failover the old master's downtime, for
	// HolderPause the sleep past the lease's end.
	For time.Duration
	// Targets are servers (by index) for kills, Snapshot, Pause and the
	// clocks, links for the toxics (quorum: server i's proxy; single: 0
	// the clients' link, 1 the replication link), none for Failover.
	Targets []int
	// Stagger separates the kills of several servers.
	Stagger time.Duration
	// Worker is the holder HolderPause pauses.
	Worker int
	// Jump is a clock fault's step.
	Jump time.Duration
	// Latency and Jitter: the Latency toxic.
	Latency, Jitter time.Duration
	// Delay: Timeout's close delay (0: never), ResetPeer's delay.
	Delay time.Duration
	// Stream is a toxic's direction: "downstream" (replies) or "upstream".
	Stream string
	// Lose is how much of its AOF's tail a KillAOF drops.
	Lose time.Duration
	// Replica (single, kills): the target is whichever server is the
	// replica when the fault runs, not Targets; a kill of the master it
	// may still meet (roles swap in a failover) is recorded as one.
	Replica bool
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d +%.3fs %s", f.N, f.At.Seconds(), f.Kind)
	switch f.Kind {
	case HolderPause:
		fmt.Fprintf(&b, " worker %d", f.Worker)
	case Break:
		fmt.Fprintf(&b, " key %d by worker %d", f.Targets[0], f.Worker)
	case Failover:
	default:
		if f.Replica {
			b.WriteString(" [replica]")
		} else {
			fmt.Fprintf(&b, " %v", f.Targets)
		}
	}
	if f.Stagger > 0 {
		fmt.Fprintf(&b, " stagger %v", f.Stagger)
	}
	switch f.Kind {
	case ClockForward, ClockBack:
		fmt.Fprintf(&b, " jump %v", f.Jump)
	case Latency:
		fmt.Fprintf(&b, " %v±%v %s", f.Latency, f.Jitter, f.Stream)
	case Timeout, ResetPeer:
		fmt.Fprintf(&b, " delay %v %s", f.Delay, f.Stream)
	}
	if f.Lose > 0 {
		fmt.Fprintf(&b, " losing %v", f.Lose)
	}
	if f.For > 0 {
		fmt.Fprintf(&b, " for %v", f.For)
	}
	return b.String()
}

// Strategies the nemesis runs.
const (
	Quorum = "quorum"
	Single = "single"
)

// Locker kinds of a worker.
const (
	QuorumLocker   = "quorum"          // quorum.New, tokens and the lost-data guard on
	SingleLocker   = "single"          // single.New
	ReplicasLocker = "single-replicas" // single.New with option.Replicas(1, ReplicaTimeout)
)

// Bias steers a schedule toward the faults one violation needs, for the
// tests that show the nemesis can fail, and for the one that shows a
// fault the library once failed is now survived.
type Bias string

const (
	// NoBias: the random mix.
	NoBias Bias = ""
	// LoseMajority (quorum): every 2-2.5 s, 3 of the 5 servers killed and
	// restarted empty within ~150 ms, while the workers hold their keys.
	LoseMajority Bias = "lose-majority"
	// PauseHolders: a holder pause about every second.
	PauseHolders Bias = "pause-holders"
	// RestoreMajority (quorum): every 2.5-3 s, an RDB snapshot of every
	// server, then 0.5-1.5 s later 3 of the 5 servers killed and
	// restarted from it, while the workers hold their keys: Redis's
	// default persistence, the restore the lost-data guard once let vote
	// at once.
	RestoreMajority Bias = "restore-majority"
	// ExpireHolders: one lock key, no other primitive, and a holder
	// pause every 0.6-1 s: the six workers queue on the key, and every
	// paused holder's lease runs out with waiters behind it, told by the
	// server when it ends. What a lock that grants early needs.
	ExpireHolders Bias = "expire-holders"
	// ExpireQueued: the four lock keys that are not an office, no other
	// primitive, no fault, and every lock call an overstay when a key is
	// free (see overstay): leases held to their end, one after another,
	// by holders that joined no queue, with waiters queued behind them.
	// What a quorum that grants early needs: a holder that had waited
	// keeps its ticket at the queue's head until it releases.
	ExpireQueued Bias = "expire-queued"
)

// Worker is one worker's plan.
type Worker struct {
	Client string // "go-redis" or "valkey-go"
	Locker string // QuorumLocker, SingleLocker or ReplicasLocker
}

// Plan is everything a run does that the seed decides: the deployment,
// the workload and the fault schedule. Plan(seed, ...) is a pure function:
// the same seed plans the same run.
type Plan struct {
	Strategy string
	Seed     int64
	Duration time.Duration // the fault phase
	Bias     Bias
	// AOF[i]: server i persists with AOF (appendfsync everysec) as well as
	// RDB snapshots; otherwise with RDB snapshots only.
	AOF            []bool
	TTL            time.Duration // every lease's, and the quorum's max TTL
	NodeTimeout    time.Duration // quorum
	ReplicaTimeout time.Duration // single option.Replicas
	Keys           []string
	// Permits names a semaphore of PermitsN permits that the workers
	// of the single strategy also take (see permit); empty on a quorum.
	Permits  string
	PermitsN int
	// RWLock names a read-write lock (package rwlock) that the workers of
	// the single strategy also take, as readers or writers (see
	// workload.rwlock); empty on a quorum.
	RWLock  string
	Workers []Worker
	// LongHolds is the share, in percent, of Do calls that hold their
	// lease long (longHold, across renewals) rather than briefly
	// (shortHold): a restart loses a lock only while someone holds it.
	LongHolds int
	Faults    []Fault
	// Storms are the stretches of the random mix in which faults that
	// suspend a promise run (see Calm); none under a Bias.
	Storms []Span
}

// The hold times of a Do call.
var (
	shortHold = [2]time.Duration{10 * time.Millisecond, 250 * time.Millisecond}
	longHold  = [2]time.Duration{500 * time.Millisecond, 2500 * time.Millisecond}
)

// hold draws a hold time.
func (p *Plan) hold(rng *rand.Rand) time.Duration {
	if rng.IntN(100) < p.LongHolds {
		return between(rng, longHold[0], longHold[1])
	}
	return between(rng, shortHold[0], shortHold[1])
}

// resources are the names the workers write to under a lease: the lock
// keys, and each slot of the permits (a permit's lease Key, NAME#SLOT),
// which a fence guards as it guards a lock.
func (p *Plan) resources() []string {
	rs := slices.Clone(p.Keys)
	for i := range p.PermitsN {
		rs = append(rs, permitSlot(p.Permits, i))
	}
	return rs
}

// permitSlot is the lease Key of the permit of name in slot i.
func permitSlot(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// keyShapes are the lock keys: plain, braces inside, a leading '}', and
// binary bytes; and the lock of an election's office, for which the
// workers mostly campaign (see campaign) rather than lock it.
var keyShapes = []string{"plain", "a{b}c", "}x{y", "bin\x00\xff\x80\x01", election.KeyPrefix + "office"}

// NewPlan plans a run of strategy for duration from seed.
func NewPlan(seed int64, strategy string, duration time.Duration, bias Bias) *Plan {
	h := fnv.New64a()
	h.Write([]byte(strategy))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	p := &Plan{Strategy: strategy, Seed: seed, Duration: duration, Bias: bias}
	servers := 5
	if strategy == Single {
		servers = 2
	}
	p.AOF = make([]bool, servers)
	for i := range p.AOF {
		p.AOF[i] = rng.IntN(2) == 0
	}
	p.TTL = time.Duration(4+rng.IntN(5)) * 250 * time.Millisecond // 1s..2s
	p.NodeTimeout = time.Duration(100+rng.IntN(151)) * time.Millisecond
	p.ReplicaTimeout = 100 * time.Millisecond
	p.Keys = slices.Clone(keyShapes)
	if strategy == Single {
		p.Permits, p.PermitsN = "pool", 2
		p.RWLock = "rw"
	}
	p.LongHolds = 50
	switch bias {
	case LoseMajority:
		p.Keys = p.Keys[:2] // more contention: a violation needs two holders of one key
		p.LongHolds = 100   // and a holder when the majority goes
		// A holder's renewal, refused by the restarted majority, races
		// the waiters' next attempt: a longer TTL renews less often, and
		// a longer node timeout lets a waiter's first call to a restarted
		// server (a new connection) count.
		p.TTL, p.NodeTimeout = 2*time.Second, 250*time.Millisecond
	case PauseHolders:
		p.Keys = p.Keys[:2]
	case ExpireHolders:
		p.Keys = p.Keys[:1]
		p.Permits, p.PermitsN, p.RWLock = "", 0, ""
	case ExpireQueued:
		p.Keys = p.Keys[:4]
		p.Permits, p.PermitsN, p.RWLock = "", 0, ""
	case RestoreMajority:
		p.Keys = p.Keys[:2]
		p.LongHolds = 100
		p.TTL, p.NodeTimeout = 2*time.Second, 250*time.Millisecond
		for i := range p.AOF {
			p.AOF[i] = false // every server restores its RDB snapshot
		}
	}
	for i := range 6 {
		// Both of Open's client libraries, whatever DLOCK_CLIENTS says:
		// a seed plans the same workers wherever it is replayed.
		w := Worker{Client: redistest.OpenClients[rng.IntN(len(redistest.OpenClients))], Locker: QuorumLocker}
		if strategy == Single {
			w.Locker = SingleLocker
			if i%2 == 1 {
				w.Locker = ReplicasLocker
			}
		}
		p.Workers = append(p.Workers, w)
	}
	switch bias {
	case LoseMajority:
		p.Faults = loseMajority(rng, duration, servers)
	case PauseHolders:
		p.Faults = pauseHolders(rng, duration, len(p.Workers), 800*time.Millisecond, 1500*time.Millisecond)
	case ExpireHolders:
		p.Faults = pauseHolders(rng, duration, len(p.Workers), 600*time.Millisecond, time.Second)
	case RestoreMajority:
		p.Faults = restoreMajority(rng, duration, servers)
	case ExpireQueued:
	default:
		p.Faults = randomFaults(rng, p, servers)
	}
	for i := range p.Faults {
		p.Faults[i].N = i
	}
	return p
}

// A fault phase of the random mix alternates storms, where every fault of
// the mix runs, with calm stretches, where only the faults that suspend
// no promise of the strategy do (Calm): a violation is excused only in a
// window of a fault that suspends its property, so a schedule that is all
// storm would judge little. A storm lasts stormLen, a calm stretch
// calmLen, and a storm's faults end by its end plus stormSpill, so that
// their windows close early in the calm.
var (
	stormLen   = [2]time.Duration{3 * time.Second, 4500 * time.Millisecond}
	calmLen    = [2]time.Duration{11 * time.Second, 17 * time.Second}
	stormSpill = 300 * time.Millisecond
)

// The mean time between two faults' starts, in a storm and in a calm
// stretch.
const (
	stormGap = 400 * time.Millisecond
	calmGap  = 700 * time.Millisecond
)

// Calm reports whether a fault of kind k suspends no promise of strategy
// (the package doc's table): on the quorum, all but the clock faults; on
// the single strategy, the faults that lose no master's data and leave
// clocks alone (kills of the replica, see Fault.Replica, are calm).
func Calm(strategy string, k Kind) bool {
	switch k {
	case ClockForward, ClockBack:
		return false
	case KillEmpty, KillRDB, KillAOF, Failover:
		return strategy == Quorum
	}
	return true
}

// Span is a stretch of the fault phase, from its start.
type Span struct{ From, To time.Duration }

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

type weighted struct {
	k Kind
	w int
}

// draw picks a kind from mix by weight.
func draw(rng *rand.Rand, mix []weighted) Kind {
	total := 0
	for _, m := range mix {
		total += m.w
	}
	n := rng.IntN(total)
	for _, m := range mix {
		if n < m.w {
			return m.k
		}
		n -= m.w
	}
	return mix[len(mix)-1].k
}

// randomFaults plans the random mix: storms and calm stretches in turn
// (p.Storms), from the first storm at 0.5-1 s to the end of p.Duration.
func randomFaults(rng *rand.Rand, p *Plan, servers int) []Fault {
	mix := []weighted{{KillEmpty, 2}, {KillRDB, 5}, {KillAOF, 4}, {Snapshot, 5}, {Pause, 3},
		{ClockForward, 1}, {ClockBack, 1}, {Latency, 2}, {Timeout, 2}, {ResetPeer, 2}, {HolderPause, 2}, {Break, 5}}
	if p.Strategy == Single {
		mix = append(mix, weighted{Failover, 2})
	}
	var calm []weighted
	for _, m := range mix {
		if Calm(p.Strategy, m.k) {
			calm = append(calm, m)
		}
	}
	if p.Strategy == Single {
		// The replica's restarts: promised through, and the only kills a
		// calm stretch of the single strategy has.
		calm = append(calm, weighted{KillRDB, 3})
	}
	var rdb, aof []int
	for i, a := range p.AOF {
		if a {
			aof = append(aof, i)
		} else {
			rdb = append(rdb, i)
		}
	}
	var out []Fault
	var clockFree time.Duration // clock faults never overlap: one offset at a time
	for from := between(rng, 500*time.Millisecond, time.Second); from < p.Duration; {
		// A short run (the suite's) has one storm, an eighth of it long.
		storm := Span{From: from, To: min(from+min(between(rng, stormLen[0], stormLen[1]), p.Duration/8), p.Duration)}
		p.Storms = append(p.Storms, storm)
		calmTo := min(storm.To+between(rng, calmLen[0], calmLen[1]), p.Duration)
		if p.Duration-calmTo < stormLen[0]+calmLen[0] {
			// No room for a storm and the calm it needs: calm to the end.
			calmTo = p.Duration
		}
		for _, phase := range []struct {
			span Span
			mix  []weighted
			gap  time.Duration
			calm bool
		}{{storm, mix, stormGap, false}, {Span{storm.To, calmTo}, calm, calmGap, true}} {
			for at := phase.span.From; ; at += time.Duration(rng.ExpFloat64() * float64(phase.gap)) {
				if at >= phase.span.To {
					break
				}
				k := draw(rng, phase.mix)
				replica := phase.calm && p.Strategy == Single && k == KillRDB
				if replica {
					// Whichever server is the replica then, restarted
					// from its own files, RDB or AOF.
					k = KillEmpty
				}
				f, ok := newFault(rng, p, k, at, servers, rdb, aof, &clockFree)
				if !ok || f.At >= phase.span.To {
					continue
				}
				if replica {
					f.Kind, f.Replica, f.Targets = KillRDB, true, nil
				}
				if end := phase.span.To + stormSpill; !phase.calm && f.At+f.For > end {
					// A storm's faults end with it, so that their windows
					// close early in the calm stretch after it.
					f.For = max(end-f.At, 50*time.Millisecond)
				}
				out = append(out, f)
			}
		}
		from = calmTo
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out
}

// newFault draws the rest of a fault of kind k at at; false when the
// deployment has no server for it.
func newFault(rng *rand.Rand, p *Plan, k Kind, at time.Duration, servers int, rdb, aof []int, clockFree *time.Duration) (Fault, bool) {
	f := Fault{Kind: k, At: at}
	switch k {
	case KillEmpty, KillRDB, KillAOF:
		pool := rdb
		switch k {
		case KillEmpty:
			pool = make([]int, servers)
			for i := range pool {
				pool[i] = i
			}
		case KillAOF:
			pool = aof
		}
		if len(pool) == 0 {
			return f, false
		}
		count := 1
		if p.Strategy == Quorum {
			// A majority losing a lock at once is what a restore
			// must survive: give it a fair share.
			switch r := rng.IntN(10); {
			case r >= 5:
				count = 3
			case r >= 2:
				count = 2
			}
		}
		f.Targets = pick(rng, pool, count)
		f.Stagger = between(rng, 0, 150*time.Millisecond)
		// Mostly a quick restart, as a supervisor does; now and
		// then a longer outage.
		f.For = between(rng, 50*time.Millisecond, 400*time.Millisecond)
		if rng.IntN(10) < 3 {
			f.For = between(rng, 400*time.Millisecond, 2*time.Second)
		}
		if k == KillAOF {
			f.Lose = between(rng, time.Second, 2*time.Second)
		}
	case Snapshot:
		f.Targets = []int{rng.IntN(servers)}
	case Pause:
		f.Targets = []int{rng.IntN(servers)}
		f.For = between(rng, 200*time.Millisecond, 3*time.Second)
	case ClockForward, ClockBack:
		if f.At < *clockFree {
			f.At = *clockFree
		}
		f.Targets = []int{rng.IntN(servers)}
		f.Jump = time.Duration(1000+rng.IntN(4001)) * time.Millisecond
		f.For = between(rng, 200*time.Millisecond, 3*time.Second)
		*clockFree = f.At + f.For + 200*time.Millisecond
	case Latency, Timeout, ResetPeer:
		f.Targets = []int{rng.IntN(servers)} // single: link 0 clients', 1 replication
		f.For = between(rng, 200*time.Millisecond, 3*time.Second)
		f.Stream = "downstream"
		if rng.IntN(10) < 3 {
			f.Stream = "upstream"
		}
		switch k {
		case Latency:
			f.Latency = time.Duration(20+rng.IntN(281)) * time.Millisecond
			f.Jitter = time.Duration(rng.Int64N(int64(f.Latency)/2 + 1)).Round(time.Millisecond)
		case Timeout:
			if rng.IntN(2) == 0 {
				f.Delay = time.Duration(100+rng.IntN(901)) * time.Millisecond
			}
		case ResetPeer:
			f.Delay = time.Duration(rng.IntN(201)) * time.Millisecond
		}
	case Failover:
		f.For = between(rng, 200*time.Millisecond, 1500*time.Millisecond)
	case HolderPause:
		f.Worker = rng.IntN(len(p.Workers))
		f.For = between(rng, 200*time.Millisecond, 1500*time.Millisecond)
	case Break:
		f.Worker = rng.IntN(len(p.Workers))
		f.Targets = []int{rng.IntN(len(p.Keys))}
	}
	return f, f.At < p.Duration
}

// pick returns n distinct elements of pool (all of them when n is larger).
func pick(rng *rand.Rand, pool []int, n int) []int {
	p := slices.Clone(pool)
	rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:min(n, len(p))]
}

func loseMajority(rng *rand.Rand, d time.Duration, servers int) []Fault {
	all := make([]int, servers)
	for i := range all {
		all[i] = i
	}
	var out []Fault
	for at := 1500 * time.Millisecond; at < d; at += between(rng, 2000*time.Millisecond, 2500*time.Millisecond) {
		out = append(out, Fault{Kind: KillEmpty, At: at, Targets: pick(rng, all, servers/2+1),
			Stagger: between(rng, 0, 20*time.Millisecond), For: between(rng, 30*time.Millisecond, 100*time.Millisecond)})
	}
	return out
}

func restoreMajority(rng *rand.Rand, d time.Duration, servers int) []Fault {
	all := make([]int, servers)
	for i := range all {
		all[i] = i
	}
	var out []Fault
	for at := 1500 * time.Millisecond; at < d; at += between(rng, 2500*time.Millisecond, 3000*time.Millisecond) {
		for _, i := range all {
			out = append(out, Fault{Kind: Snapshot, At: at, Targets: []int{i}})
		}
		out = append(out, Fault{Kind: KillRDB, At: at + between(rng, 500*time.Millisecond, 1500*time.Millisecond),
			Targets: pick(rng, all, servers/2+1), Stagger: between(rng, 0, 20*time.Millisecond),
			For: between(rng, 30*time.Millisecond, 100*time.Millisecond)})
	}
	return out
}

func pauseHolders(rng *rand.Rand, d time.Duration, workers int, lo, hi time.Duration) []Fault {
	var out []Fault
	for at := time.Second; at < d; at += between(rng, lo, hi) {
		out = append(out, Fault{Kind: HolderPause, At: at, Worker: rng.IntN(workers),
			For: between(rng, 500*time.Millisecond, time.Second)})
	}
	return out
}
