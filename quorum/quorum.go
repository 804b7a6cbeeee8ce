// Package quorum is the quorum strategy: the Redlock algorithm across N
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
// Unless option.Tokens(false) is given, an acquisition runs in two phases: phase 1
// sets the lock on every node and reads each node's fence counter; the
// token is max(counters read)+1, floored at the lower median of the
// voters' clocks in µs; phase 2 commits it on the voters where this owner
// still holds the lock and the counter is lower, and must succeed on a
// majority. Any two successful acquisitions share a committing node, so
// tokens of one key are unique and follow the real-time order of
// acquisitions without any clock assumption, as long as the nodes keep
// their counters (docs/models has the spin models of this argument).
//
// The lost-data guard: each node carries an epoch record, when it last lost
// or may have lost its data and the server process (run_id) that stamped
// it. A restarted node (empty, or restored from an RDB snapshot or an AOF
// synced every second) or a flushed one does not vote until the maximum
// TTL (option.MaxTTL), plus the node timeout and the drift margin, has passed
// since, and then only once its fence counters are repaired, node-wide,
// from the other nodes' high-water marks (see repairs). A fresh deployment
// waits one maximum TTL; option.DurableNodes declares nodes that never lose an
// acknowledged write and turns the guard off. The guard reads INFO at the
// first vote of each server process: the servers must be Redis 7.0 or later
// (or Valkey) and let the clients' user run INFO.
//
// Every node must be a distinct standalone server with maxmemory-policy
// noeviction; scripts are safe to run twice, as a client that re-sends a
// command after a lost reply runs them; what a node keeps for a key is
// bounded by the key's live owners and waiters, or expires (the counter,
// option.IdleTTL after its last lease). docs/quorum.md has the keys, the
// scripts, the timing and the fault-by-fault promises.
package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// ErrClosed is returned by a Locker's methods after Close.
var ErrClosed = errors.New("quorum: locker closed")

// ErrNoValidity is the reason of a *Error when a majority granted the
// lock but the acquisition took so long that no validity was left.
var ErrNoValidity = errors.New("quorum: majority answered too late, no validity left")

// ErrCallsRunning is the error of a Close that returned with calls to
// nodes still running (see Close).
var ErrCallsRunning = errors.New("quorum: closed with calls still running, which end when their clients give up or are closed")

// errNotRepaired is the error of a vote from a node that has sat out after
// losing its data but whose fence counters are not repaired yet. An attempt
// that hears from a majority of the other nodes repairs it.
var errNotRepaired = errors.New("quorum: node sat out after a restart, a flush or its first use, and its fence counters are not repaired yet")

// errRepairing is the reason of an attempt that nodes not yet repaired
// kept from a quorum.
var errRepairing = errors.New("quorum: nodes that sat out are not repaired yet; an attempt that hears from a majority repairs them, and the next one counts their votes")

// errCounterAhead is a phase 2 refusal: the node's counter had already
// reached the token, so another acquisition committed a token at least as
// large in the meantime.
var errCounterAhead = errors.New("quorum: fence counter moved ahead")

// errBadCommit is a phase 2 answer of another shape than the scripts
// give: an error, never a commit.
var errBadCommit = errors.New("quorum: unexpected commit reply")

// Locker grants leases on keys by majority of its nodes. Its methods are
// safe for concurrent use.
type Locker struct {
	nodes  []node.Node
	names  []string
	cfg    settings.Locker
	sitOut time.Duration               // how long after its epoch a node does not vote (see New)
	queues [][workersPerNode]chan call // per node, a lane per worker (see lane)

	workers  sync.WaitGroup // the node workers, ended by Close
	busy     []atomic.Int32 // by node, calls running in its client
	stopOnce sync.Once
	every    []int     // every node's index; read only
	rounds   sync.Pool // idle *round (see round)
	args     argStrings

	wmu       sync.Mutex
	listening map[string]*listening // Acquire calls subscribed, by key

	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup // operations in progress and the goroutines they started
	closing context.Context
	close   context.CancelCauseFunc
}

// New returns a Locker over nodes, which it uses but does not own: Close
// leaves them open. Every node must be a distinct, independent server.
// opts may set option.TTL, IdleTTL, Retry, DriftFactor, Observer,
// DurableNodes, NodeTimeout, MaxTTL and Tokens. Bad arguments, and options
// that do not apply, are reported as a *lease.ArgError.
//
// NodeTimeout must be small next to the TTL (below half of it): a slow
// node is left behind, not waited for. MaxTTL must be at least every TTL
// this Locker's leases use, per call and in Extend: longer ones are
// refused while the lost-data guard is on. IdleTTL is how long a key's
// fence counter outlives the last lease on it on each node; a key locked
// again later gets tokens from the clock floor (the lower median of its
// voters' clocks in µs). Without tokens there is no counter, and IdleTTL
// does not matter.
//
// With an Observer, the Locker reports every acquisition: an
// AcquireStarted event, one Vote event per node answer of each attempt's
// first phase (Outcome "ok" for a vote that counts, "taken", "error",
// "timeout" or "sits_out"; Wait is the node's round trip), and an
// AcquireEnded event whose Wait is the time to the outcome (for Acquire,
// the whole wait) and whose Err is the error returned. Every lease it
// grants reports its renewals, its loss and its release. Events carry
// Strategy "quorum". The Observer is called from the goroutines of
// concurrent acquisitions at once.
func New(nodes []node.Node, opts ...option.Option) (*Locker, error) {
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
	cfg, err := settings.New(settings.Quorum, opts)
	if err != nil {
		return nil, err
	}
	lk := &Locker{nodes: nodes, names: names, cfg: cfg}
	// A node that lost its data sits out the max TTL, by its own clock,
	// and then the node timeout and the drift margin more: the repair
	// reads the other nodes' marks in the same fan-out as the node's own
	// vote, and those may be read up to a node timeout before it, so the
	// margin keeps every commit of an acquisition in flight at the loss
	// before the read (see repairs). settings.New refused a sum past the
	// largest Duration, which turned negative: the lost-data guard then
	// never sat a node out.
	lk.sitOut = cfg.MaxTTL + lk.nodeTimeout(cfg.MaxTTL) + settings.Drift(cfg.MaxTTL, cfg.Drift)
	lk.closing, lk.close = context.WithCancelCause(context.Background())
	lk.rounds.New = func() any { return lk.newRound() }
	lk.args = argStrings{ttl: strconvMs(cfg.TTL), keep: strconvMs(cfg.TTL + cfg.IdleTTL), gone: lk.goneKeep(), idle: "-1"}
	if cfg.IdleTTL >= 0 {
		lk.args.idle = strconvMs(cfg.IdleTTL)
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
func (lk *Locker) nodeTimeout(ttl time.Duration) time.Duration { return lk.cfg.NodeTimeoutFor(ttl) }

// Quorum returns the number of nodes that must agree: N/2+1.
func (lk *Locker) Quorum() int { return len(lk.nodes)/2 + 1 }

// options checks a call's context and key and resolves its opts, a TTL
// of ttl when they set none.
func (lk *Locker) options(ctx context.Context, key string, ttl time.Duration, opts []option.Option) (settings.Call, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return settings.Call{}, err
	}
	return lk.cfg.CallFrom(ttl, opts)
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
	t := time.NewTimer(lk.cleanupTimeout(max(lk.cfg.TTL, lk.cfg.MaxTTL)) + time.Second)
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

// Nodes returns the servers the Locker runs on, in the order New was
// given them, for what lives beside its locks (package ratelimit). The
// slice is the caller's; the Nodes stay whoever built them.
func (lk *Locker) Nodes() []node.Node { return slices.Clone(lk.nodes) }

// strategy names this strategy in Observer events.
const strategy = "quorum"

// all returns every node's index, in a slice the caller must not change.
func (lk *Locker) all() []int { return lk.every }

func strconvMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
