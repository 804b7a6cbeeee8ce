// Package redlock is the quorum strategy: the Redlock algorithm across N
// independent Redis or Valkey masters (no replication between them), with a
// fencing token ordered across the quorum and a guard against nodes that
// lost their data.
//
// A lock is granted when a majority, N/2+1, of the nodes accepted it and the
// time the acquisition took, plus a clock-drift margin, still leaves part of
// the TTL: the lease's validity. It keeps working while a majority of the
// nodes is reachable. An even N is wasteful: 4 nodes tolerate one failure,
// as 3 do.
//
// # Keys
//
// For a lock on KEY, every per-key key carries KEY as its hash tag: the
// lock itself, dlock:{KEY}:lock (a string holding the owner's random value,
// with a PX expiry), the fence counter dlock:{KEY}:fence, which expires
// once the key has been idle for the idle TTL (WithIdleTTL, a day by
// default), dlock:{KEY}:gone (owners whose late votes are refused, each
// for the maximum TTL), and the waiters' queue dlock:{KEY}:queue with
// dlock:{KEY}:queue:deadlines (see Acquire), which expire with their last
// ticket. Releases are published on the channel dlock:{KEY}:released. So a
// node holds, per key, a counter while the key is in use or idle for less
// than the idle TTL, a ticket per live waiter, and a record per owner
// given up in the last maximum TTL whose vote's call failed or timed out.
// Each node also holds four node-wide keys, kept forever: dlock:epoch,
// read by every vote's script, and dlock:high, dlock:floor and
// dlock:repaired (below), which the scripts touch next to the per-key
// ones. Nodes must be standalone servers (or one master each): a Redis
// Cluster could not run those scripts.
//
// Every script is safe to run twice, as a client that re-sends a command
// after a lost reply (go-redis with its default MaxRetries) runs it: a
// vote or a commit run again for the owner that made it is the grant it
// made, and a release run again after it succeeded (with tokens) still
// counts.
//
// # Deployment
//
// Every node must be a distinct server: two addresses of one server (a
// hostname and its IP, say) would give it two votes, and a majority of
// addresses would no longer be a majority of servers.
//
// Every node must run with maxmemory-policy noeviction (the default). An
// evicted lock key frees a lock that is still held; an evicted fence
// counter, dlock:high or dlock:floor lets a later token fall below one
// already issued. The lost-data guard sees neither: the node's epoch may
// well survive.
//
// A failed attempt releases its vote on every node; a release lost with a
// broken connection leaves that vote holding the lock on its node until
// the TTL runs out. That costs liveness (one node fewer for others until
// then), never safety.
//
// # Fencing token
//
// Unless WithoutTokens is given, an acquisition runs in two phases. Phase 1
// sets the lock on every node and reads each node's fence counter. The token
// is t = max(counters read)+1, floored at the median of the voters' server
// clocks in microseconds. Phase 2 sets counter = t on the voters, only where
// this owner still holds the lock and the counter is below t, and must
// succeed on a majority. Any two successful acquisitions share a committing
// node, where the later commit needed a strictly larger counter, so tokens
// of one key are unique and follow the real-time order of acquisitions
// without any clock assumption, as long as the nodes keep their counters.
// The clock floor keeps tokens rising even when counters were lost, as long
// as the servers' clocks do not step back. Tokens are compared as Lua
// numbers on the servers: exact below 2^53, which microsecond clocks reach
// in the year 2255.
//
// # Lost data
//
// A node restarted without persistence (or flushed) forgets the locks it
// held and could grant one a second time; so does a node restarted from an
// RDB snapshot (Redis's default persistence) or from an AOF synced every
// second, which comes back without the writes made after them. Each node
// carries an epoch record, dlock:epoch: when it last lost, or may have
// lost, its data, by its own clock, and the server process that stamped it
// (INFO's run_id, read in the vote's script). A missing record is stamped
// with the node's clock; a record stamped by another process (a restart,
// whatever data it brought back) with the restart's time; a record ahead
// of the node's clock (stepped back since) is stamped anew, not waited
// out. A node whose record is younger than the maximum TTL (WithMaxTTL),
// plus the node timeout and the drift margin, does not vote: every
// acquisition that was in flight when it lost its data has ended by then.
// This is Redlock's delayed restart, enforced by the client. The record is
// checked at the first vote of each server process (see acquireBody):
// the user the quorum's clients log in as must be allowed to run INFO (in
// the @dangerous ACL category), the servers must be Redis 7.0 or later (or
// Valkey), and nothing but dlock may load its scripts into them.
//
// Such a node also lost its fence counters, and is repaired once, for all
// keys, before it votes again. Every commit raises the node's high-water
// mark, dlock:high, to its token: the highest token ever committed there,
// whatever the key. Every vote returns that mark. A node past its sit-out
// whose repair mark, dlock:repaired, is not its current epoch still does
// not vote; an attempt that got answers from at least a majority of the
// OTHER nodes (in any state) then repairs it, after its own outcome, off
// its critical path: dlock:floor becomes the highest mark those answers
// held, the node's own mark rises to it, and dlock:repaired takes the
// epoch. From then on the node's counter for any key counts as
// max(counter, floor), and the node votes from the next attempt on. Every
// token committed before the loss is below the floor (see repairs for the
// argument). This is the repair step of models/quorum_token_repair.pml,
// done node-wide; like the model, it assumes one node loses its data at a
// time: a second node does not lose its data before the first is repaired.
//
// So with one node repaired and the others intact, every key, even one
// never locked before, is acquirable while a majority of the nodes lives.
// A brand-new node is indistinguishable from one that lost its data: a
// fresh deployment grants nothing during its first maximum TTL, and then
// each node is repaired (from the others, all at mark 0) by the first
// attempt that hears from a majority of the other nodes, so the first
// repair needs N/2+2 nodes answering. A node whose restart no client saw
// until long after it (its uptime past the sit-out) does not sit out
// again, but is still repaired before it votes.
// Declare nodes that never lose acknowledged writes (AOF with appendfsync
// always, and no flush) with WithDurableNodes to skip the sit-out and the
// repair.
package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// Defaults of a Locker's options.
const (
	DefaultTTL = 30 * time.Second
	// DefaultNodeTimeout is the least node timeout by default: without
	// WithNodeTimeout, each acquisition bounds its calls to one node by
	// max(DefaultNodeTimeout, TTL/50), 600 ms for the default TTL. A
	// fixed 50 ms failed about 1% of attempts with 64 concurrent callers
	// on a loaded two-core machine; TTL/50 stays small next to the TTL.
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultIdleTTL is how long a key's fence counter outlives the last
	// lease on it by default (see WithIdleTTL).
	DefaultIdleTTL = 24 * time.Hour
)

// ErrClosed is returned by a Locker's methods after Close.
var ErrClosed = errors.New("redlock: locker closed")

// ErrNoValidity is the reason of a *QuorumError when a majority granted the
// lock but the acquisition took so long that no validity was left.
var ErrNoValidity = errors.New("redlock: majority answered too late, no validity left")

// errNotRepaired is the error of a vote from a node that has sat out after
// losing its data but whose fence counters are not repaired yet. An attempt
// that hears from a majority of the other nodes repairs it.
var errNotRepaired = errors.New("redlock: node lost its data and its fence counters are not repaired yet")

// errCounterAhead is a phase 2 refusal: the node's counter had already
// reached the token, so another acquisition committed a token at least as
// large in the meantime.
var errCounterAhead = errors.New("redlock: fence counter moved ahead")

// errLostData is a node's error while it sits out after losing its data.
var errLostData = errors.New("redlock: node lost its data less than the maximum TTL ago")

// Option configures a Locker.
type Option func(*config)

type config struct {
	ttl            time.Duration
	drift          float64
	nodeTimeout    time.Duration
	nodeTimeoutSet bool
	retry          lease.Retry
	noTokens       bool
	guard          bool
	maxTTL         time.Duration
	idle           time.Duration // < 0: for ever
	observer       lease.Observer
}

// WithTTL sets the default TTL of a lease; lease.WithTTL overrides it per
// acquisition. Default DefaultTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithDriftFactor sets the share of the TTL given up to clock drift, in
// [0, 0.5), on top of 2 ms, the granularity of the servers' expiry. Default
// 0.01.
func WithDriftFactor(f float64) Option { return func(c *config) { c.drift = f } }

// WithNodeTimeout bounds each call to one node. It must be small next to
// the TTL (below half of it): a slow node is left behind, not waited for.
// Default: max(DefaultNodeTimeout, TTL/50) of each lease's TTL.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) { c.nodeTimeout, c.nodeTimeoutSet = d, true }
}

// WithRetry sets how Acquire paces its attempts by default; lease.WithRetry
// overrides it per acquisition.
func WithRetry(r lease.Retry) Option { return func(c *config) { c.retry = r } }

// WithoutTokens makes acquisition the plain one-phase Redlock: faster, but
// leases carry no fencing token (Token 0, Fenced false).
func WithoutTokens() Option { return func(c *config) { c.noTokens = true } }

// WithDurableNodes declares that no node ever loses an acknowledged write
// (AOF with appendfsync always, and no flush): the lost-data guard is off,
// so fresh nodes vote at once, with no sit-out and no repair. On nodes
// that do lose writes (a restart from an RDB snapshot or an AOF synced
// every second, or without persistence) a restarted node may then grant a
// lock that is still held, and hand out a token already issued.
func WithDurableNodes() Option { return func(c *config) { c.guard = false } }

// WithIdleTTL sets how long a key's fence counter outlives the last lease
// on it: d after the end of the lease granted or extended last, the
// counter expires on each node. A key locked again later gets tokens from
// the clock floor (the lower median of its voters' clocks in µs), so they
// still rise as long as those clocks do not step back past the tokens
// issued before. Zero selects DefaultIdleTTL (a day); a negative d keeps
// every counter for ever, one per key ever locked. Without tokens there is
// no counter, and d does not matter.
func WithIdleTTL(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithMaxTTL sets how long a node that lost its data sits out. It must be at
// least every TTL this Locker's leases use, including per-acquisition
// lease.WithTTL and Extend: acquisitions and extensions with a longer TTL
// are refused with an *lease.ArgError while the guard is on. Default: the
// TTL of WithTTL.
func WithMaxTTL(d time.Duration) Option { return func(c *config) { c.maxTTL = d } }

// WithObserver makes the Locker report every acquisition to o: an
// AcquireStarted event, one Vote event per node answer of each attempt's
// first phase (Outcome "ok" for a vote that counts, "taken", "error",
// "timeout" or "lost_data"; Wait is the node's round trip), and an
// AcquireEnded event whose Wait is the time to the outcome (for Acquire,
// the whole wait) and whose Err is the error returned. Every lease it grants
// reports its renewals, its loss and its release. Events carry Strategy
// "quorum". o is called synchronously, from the goroutines of concurrent
// acquisitions at once, and must not block. With a nil o (the default)
// nothing is reported and no Event is built.
func WithObserver(o lease.Observer) Option { return func(c *config) { c.observer = o } }

// Locker grants leases on keys by majority of its nodes. Its methods are
// safe for concurrent use.
type Locker struct {
	nodes  []node.Node
	names  []string
	cfg    config
	sitOut time.Duration               // how long after its epoch a node does not vote (see New)
	queues [][workersPerNode]chan call // per node, a lane per worker (see lane)

	workers  sync.WaitGroup // the node workers, ended by Close
	busy     []atomic.Int32 // by node, calls running in its client
	stopOnce sync.Once
	every    []int // every node's index; read only

	wmu     sync.Mutex
	waiting map[string][]*waiter // Acquire calls subscribed, by key

	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup // operations in progress and the goroutines they started
	closing context.Context
	close   context.CancelCauseFunc
}

// New returns a Locker over nodes, which it uses but does not own: Close
// leaves them open. Every node must be a distinct, independent server.
// Bad arguments are reported as a *lease.ArgError.
func New(nodes []node.Node, opts ...Option) (*Locker, error) {
	cfg := config{
		ttl:   DefaultTTL,
		drift: acquire.DefaultDriftFactor,
		guard: true,
	}

	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if len(nodes) == 0 {
		return nil, &lease.ArgError{Arg: "nodes", Value: len(nodes), Rule: "must hold at least one node"}
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return nil, &lease.ArgError{Arg: "nodes", Value: i, Rule: "must not hold a nil node (index given)"}
		}
		names[i] = n.String()
	}
	if err := acquire.CheckDriftFactor(cfg.drift); err != nil {
		return nil, err
	}
	if err := acquire.CheckTTL(cfg.ttl, cfg.drift); err != nil {
		return nil, err
	}
	if err := cfg.retry.Check(); err != nil {
		return nil, err
	}
	if cfg.nodeTimeoutSet && cfg.nodeTimeout <= 0 {
		return nil, &lease.ArgError{Arg: "node timeout", Value: cfg.nodeTimeout, Rule: "must be > 0"}
	}
	if cfg.maxTTL == 0 {
		cfg.maxTTL = cfg.ttl
	}
	if cfg.idle == 0 {
		cfg.idle = DefaultIdleTTL
	}
	if cfg.maxTTL < 0 {
		return nil, &lease.ArgError{Arg: "max TTL", Value: cfg.maxTTL, Rule: "must be > 0"}
	}
	lk := &Locker{nodes: nodes, names: names, cfg: cfg}
	// A node that lost its data sits out the max TTL, by its own clock,
	// and then the node timeout and the drift margin more: the repair
	// reads the other nodes' marks in the same fan-out as the node's own
	// vote, and those may be read up to a node timeout before it, so the
	// margin keeps every commit of an acquisition in flight at the loss
	// before the read (see repairs).
	lk.sitOut = cfg.maxTTL + lk.nodeTimeout(cfg.maxTTL) + acquire.Drift(cfg.maxTTL, cfg.drift)
	lk.closing, lk.close = context.WithCancelCause(context.Background())
	if err := lk.checkTTL(cfg.ttl); err != nil {
		return nil, err
	}
	lk.busy = make([]atomic.Int32, len(nodes))
	lk.every = make([]int, len(nodes))
	for i := range lk.every {
		lk.every[i] = i
	}
	lk.startWorkers()
	return lk, nil
}

// nodeTimeout returns the bound of one call to a node, for leases of ttl.
func (lk *Locker) nodeTimeout(ttl time.Duration) time.Duration {
	if lk.cfg.nodeTimeout > 0 {
		return lk.cfg.nodeTimeout
	}
	return max(DefaultNodeTimeout, ttl/50)
}

// Quorum returns the number of nodes that must agree: N/2+1.
func (lk *Locker) Quorum() int { return len(lk.nodes)/2 + 1 }

// checkTTL refuses a TTL the Locker cannot serve safely.
func (lk *Locker) checkTTL(ttl time.Duration) error {
	if err := acquire.CheckTTL(ttl, lk.cfg.drift); err != nil {
		return err
	}
	if lk.nodeTimeout(ttl) >= ttl/2 {
		return &lease.ArgError{Arg: "node timeout", Value: lk.nodeTimeout(ttl),
			Rule: "must be below half the TTL (" + ttl.String() + ")"}
	}
	if lk.cfg.guard && ttl > lk.cfg.maxTTL {
		return &lease.ArgError{Arg: "ttl", Value: ttl,
			Rule: "must not exceed the max TTL (" + lk.cfg.maxTTL.String() + ") the lost-data guard waits out"}
	}
	return nil
}

// begin registers an operation, so Close waits for it and for the
// goroutines it starts.
func (lk *Locker) begin() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.closed {
		return ErrClosed
	}
	lk.wg.Add(1)
	return nil
}

// Close stops new operations, ends the waits of Acquire calls in progress
// (their error then matches ErrClosed), and waits for the operations in
// progress, including the cleanup of late answers. It neither closes the
// nodes nor releases leases still held; those can no longer be extended or
// released (ErrClosed) and expire on the servers at the end of their TTL.
//
// Every call to a node is bounded by the Locker's timeouts, but only a
// client that honours its context's deadline ends it then. Close waits
// for the calls in progress for at most the longest of those bounds plus a
// second; calls still running after that (a stopped node behind a client
// with no timeouts) are left to end when their client gives up or is
// closed, the Locker's goroutines with them, and Close returns an error
// matching ErrCallsRunning that names their nodes.
func (lk *Locker) Close() error {
	lk.mu.Lock()
	lk.closed = true
	lk.mu.Unlock()
	lk.close(ErrClosed)
	done := make(chan struct{})
	go func() {
		lk.wg.Wait()
		lk.stopWorkers()
		close(done)
	}()
	t := time.NewTimer(lk.cleanupTimeout(max(lk.cfg.ttl, lk.cfg.maxTTL)) + time.Second)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	var busy []string
	for i := range lk.busy {
		if lk.busy[i].Load() > 0 {
			busy = append(busy, lk.names[i])
		}
	}
	return fmt.Errorf("%w on %s", ErrCallsRunning, strings.Join(busy, ", "))
}

// ErrCallsRunning is the error of a Close that returned with calls to
// nodes still running (see Close).
var ErrCallsRunning = errors.New("redlock: closed with calls still running, which end when their clients give up or are closed")

// TryAcquire makes exactly one attempt at the lock on key. It returns an
// error matching lease.ErrTaken when a majority of the nodes hold the lock
// for someone else, and a *QuorumError whenever the attempt failed, with
// each node's answer.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lease.Option) (*lease.Lease, error) {
	return acquire.Observe(lk.cfg.observer, strategy, key, func() (*lease.Lease, error) {
		return lk.tryAcquire(ctx, key, opts)
	})
}

func (lk *Locker) tryAcquire(ctx context.Context, key string, opts []lease.Option) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	l, _, err := lk.attempt(ctx, newKeySet(key), o, nil)
	return l, err
}

// Acquire waits until the lock on key is granted or ctx ends. A failed
// attempt, whatever the reason (taken, split vote, nodes down, too slow), is
// retried after a jittered delay, cut short when a release is published on
// any node. Waiters take turns: a refused attempt puts this call in a
// first-come, first-served queue on each node, ordered by the time of its
// first attempt, and a free lock goes to the queue's head only (also
// against TryAcquire); a release wakes only the earliest waiter of this
// Locker. The call leaves the queues when it gives up. When ctx ends
// first, the error matches ctx.Err(), and errors.As finds the *QuorumError
// of the last attempt that failed for want of a quorum; it matches
// lease.ErrTaken only when that attempt found the lock held by a majority,
// not when nodes were down or slow. After Close it matches ErrClosed.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lease.Option) (*lease.Lease, error) {
	return acquire.Observe(lk.cfg.observer, strategy, key, func() (*lease.Lease, error) {
		return lk.acquire(ctx, key, opts)
	})
}

func (lk *Locker) acquire(ctx context.Context, key string, opts []lease.Option) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(lk.closing, func() { cancel(ErrClosed) })()

	var wk *waker
	ks := newKeySet(key)
	wake := make(chan struct{}, 1)
	at := time.Now().UnixMicro()
	w := &waiter{
		id:    acquire.NewOwner(),
		at:    at,
		score: strconv.FormatInt(at, 10),
		life:  strconvMs(acquire.TicketLife(o.Retry)),
		wake:  wake,
	}
	defer func() {
		if wk != nil {
			wk.stop()
			lk.delist(key, w)
		}
	}()
	l, err := acquire.Wait(ctx, o.Retry, wake, func(ctx context.Context) (*lease.Lease, time.Duration, error) {
		l, hint, err := lk.attempt(ctx, ks, o, w)
		var qe *QuorumError
		if !errors.As(err, &qe) {
			return l, hint, err
		}
		w.queued = true
		if wk == nil && ctx.Err() == nil {
			lk.enlist(key, w)
			wk = lk.subscribe(ks.channel, o.TTL, wake, func() { lk.wakeFirst(key) })
		}
		if errors.Is(err, lease.ErrTaken) {
			return nil, hint, err
		}
		// Redlock retries every failure, but a quorum short of answers
		// must not read as a lock taken.
		return nil, hint, acquire.Retryable(err)
	})
	if err != nil && w.queued {
		lk.leave(ks, w, lk.all(), o.TTL)
	}
	return l, err
}

// strategy names this strategy in Observer events.
const strategy = "quorum"

// observeVote reports one node's phase 1 answer to the observer, which
// must be set.
func (lk *Locker) observeVote(key string, v *vote, rtt time.Duration) {
	var outcome string
	switch v.answer.Kind {
	case KindOK:
		outcome = "ok"
	case KindHeld:
		outcome = "taken"
	case KindTimeout:
		outcome = "timeout"
	case KindLostData:
		outcome = "lost_data"
	default:
		outcome = "error"
	}
	lk.cfg.observer.Observe(lease.Event{
		Kind: lease.Vote, Strategy: strategy, Key: key, Node: v.answer.Node,
		Outcome: outcome, Wait: rtt, Err: v.answer.Err,
	})
}

func (lk *Locker) options(ctx context.Context, key string, opts []lease.Option) (lease.Options, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return lease.Options{}, err
	}
	if err := acquire.CheckKey(key); err != nil {
		return lease.Options{}, err
	}
	o := lease.Options{TTL: lk.cfg.ttl, Retry: lk.cfg.retry}
	if len(opts) > 0 { // Apply moves o to the heap
		o = acquire.Apply(o, opts...)
		if o.TTL == 0 {
			o.TTL = lk.cfg.ttl
		}
	}
	if err := lk.checkTTL(o.TTL); err != nil {
		return lease.Options{}, err
	}
	if err := o.Retry.Check(); err != nil {
		return lease.Options{}, err
	}
	return o, nil
}

// keySet holds the names of one lock's keys, cut from one string (one
// allocation), in the order the scripts take them: script is lock, gone,
// queue, queue deadlines, then the node-wide epoch, for the acquire
// script; the token script adds the fence counter and the node-wide floor,
// high-water mark and repair mark. commit is lock, fence, floor, high;
// release is lock, gone, queue, queue deadlines, fence.
type keySet struct {
	key     string
	script  [9]string
	commit  [4]string
	release [5]string
	channel string
}

func newKeySet(key string) *keySet {
	const (
		pre = "dlock:{"
		lk  = "}:lock"
		gn  = "}:gone"
		qu  = "}:queue"
		dl  = "}:queue:deadlines"
		fn  = "}:fence"
		ch  = "}:released"
	)
	var b strings.Builder
	b.Grow(6*(len(pre)+len(key)) + len(lk+gn+qu+dl+fn+ch))
	cut := func(suffix string) string {
		start := b.Len()
		b.WriteString(pre)
		b.WriteString(key)
		b.WriteString(suffix)
		return b.String()[start:]
	}
	ks := &keySet{key: key}
	ks.script[0] = cut(lk)
	ks.script[1] = cut(gn)
	ks.script[2] = cut(qu)
	ks.script[3] = cut(dl)
	ks.script[5] = cut(fn)
	ks.channel = cut(ch)
	ks.script[4], ks.script[6], ks.script[7], ks.script[8] = epochKey, floorKey, highKey, repairedKey
	ks.commit = [4]string{ks.script[0], ks.script[5], floorKey, highKey}
	ks.release = [5]string{ks.script[0], ks.script[1], ks.script[2], ks.script[3], ks.script[5]}
	return ks
}

// acquire returns the acquire script's keys: all nine with tokens.
func (ks *keySet) acquire(tokens bool) []string {
	if tokens {
		return ks.script[:]
	}
	return ks.script[:5]
}

// extend returns the extend script's keys: the lock, and with tokens its
// fence counter.
func (ks *keySet) extend(tokens bool) []string {
	if tokens {
		return ks.commit[:2]
	}
	return ks.commit[:1]
}

// Node-wide keys.
const (
	epochKey    = "dlock:epoch"    // when the node last lost its data, µs, and the run that stamped it (see epochOf)
	highKey     = "dlock:high"     // the highest token committed on the node
	floorKey    = "dlock:floor"    // the repair's lower bound on every counter of the node
	repairedKey = "dlock:repaired" // the epoch record the node was repaired for
)

var repairKeys = []string{epochKey, floorKey, highKey, repairedKey}
