// Package single is the single-node lease strategy: a lock lives on one
// Redis or Valkey server, judged by that server's clock alone, and fenced by
// a counter the server bumps at every claim.
//
// Each key holds the current owner, its lease and the attempts counter,
// which is the lease's fencing token: every claim sets it to
// max(attempts + 1, the server's clock in µs). A key nobody queued for is
// a string the server expires with the lease ('token owner', then 'token'
// for the idle TTL after the release); a key with waiters or gone owners
// is a hash that holds the lease's end in server milliseconds. On one server, tokens of a key strictly increase from lease
// to lease whatever its clock does; across a failover or restart that lost
// the latest claims, or after the counter expired (the idle TTL, a minute
// by default, after its last release), they keep rising as long as the server's
// clock has not stepped back past the tokens issued before. Extend and
// Release check owner and token; a refusal matches lease.ErrNotHeld, and
// also fence.ErrStale when the key has been claimed again since.
//
// Every transition is one Lua script (in lua/, embedded), safe to run twice
// as a client that re-sends a command after a lost reply runs it. Waiters
// take turns first come, first served, in a queue on the server, and wake
// on a published release. A claim whose fate is unknown (its context ended,
// or the exchange failed) is given up, so a caller never holds a lock it
// does not know of; that cleanup runs on a context of its own, bounded by
// lease.ReleaseTimeout. What the server keeps for a key is bounded by its
// live owners and waiters, or expires. The server must run with
// maxmemory-policy noeviction.
//
// A single server is simple and cheap (one round trip to lock, one to
// unlock), but the lock shares the fate of that server: with asynchronous
// replication a failover can grant a lock twice (fenced, as above), which
// option.Replicas narrows. docs/single-lease.md has the scripts, the token
// argument and the fault-by-fault promises.
package single

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// ErrReplicas matches every *ReplicaError.
var ErrReplicas = errors.New("single: too few replicas acknowledged the lock")

// ReplicaError reports a claim that fewer replicas than option.Replicas
// asked for acknowledged in time. The claim has been released: no lease is left.
// It matches ErrReplicas with errors.Is.
type ReplicaError struct {
	Key    string
	Acked  int // replicas that acknowledged the claim
	Wanted int // replicas option.Replicas asked for
}

func (e *ReplicaError) Error() string {
	return "single: lock on " + strconv.Quote(e.Key) + " acknowledged by " +
		strconv.Itoa(e.Acked) + " of " + strconv.Itoa(e.Wanted) + " replicas"
}

// Is reports whether target is ErrReplicas.
func (e *ReplicaError) Is(target error) bool { return target == ErrReplicas }

// Locker grants leases on keys of one server. It implements dlock.Locker and
// is safe for concurrent use.
type Locker struct {
	n      node.Node
	cfg    engine.Base
	kit    engine.Kit
	setKit engine.Kit // for sets of keys (AcquireAll): abandon and release only
}

// New returns a Locker that keeps its locks on n, configured by opts:
// option.TTL, IdleTTL, Retry, DriftFactor, Observer and Replicas. It
// returns an *lease.ArgError when n is nil or an option does not apply or
// is out of range. The Locker does not own n: Close leaves it open.
//
// With an Observer, the Locker reports every acquisition, as an
// AcquireStarted event and then an AcquireEnded event whose Wait is the
// time to the outcome (for Acquire, the whole wait) and whose Err is the
// error returned, and every lease it grants reports its renewals, its loss
// and its release. Events carry Strategy "single".
//
// IdleTTL: d after the end of the lease granted or extended last, and at
// most 1.5 × (TTL + d) after it, a key's hash expires (claims move its
// expiry only when it falls short, not each time: see keep in
// internal/engine/lua/keep.lua). The default, a minute, is longer than
// a step back of the server's clock that costs the token order nothing
// (docs/single-lease.md). A released key in the lean form keeps its
// counter for d exactly; a lease that runs out unreleased takes its
// counter with it.
func New(n node.Node, opts ...option.Option) (*Locker, error) {
	cfg, err := engine.Configure(n, settings.Single, opts)
	if err != nil {
		return nil, err
	}
	lk := &Locker{n: n, cfg: cfg}
	lk.kit = engine.NewKit(strategy, n, &lk.cfg, scripts)
	lk.setKit = engine.NewKit(strategy, n, &lk.cfg, setScripts)
	return lk, nil
}

// TryAcquire makes one attempt at the lock on key. It returns an error
// matching lease.ErrTaken when another owner holds it, and an
// *lease.ArgError for a bad key or option. When ctx ends during the
// attempt, or the exchange with the server fails, a claim that may have
// landed is released before it returns, on a context of its own bounded
// by lease.ReleaseTimeout: against a hung server the call can return up
// to that long after ctx ended.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, false))
}

// Acquire waits until the lock on key is granted or ctx ends. Waiters
// are served first come, first served: a call that finds the lock taken
// joins the key's queue on the server, and a free lock goes to the
// queue's head (see claimScript). A waiter wakes when the holder's release
// is published, else when the holder's lease runs out or a delay from the
// retry policy passes. A failed attempt is retried whatever its cause (a
// lost connection, a timeout, a failed WAIT, too few replicas), once a
// claim it may have left on the server is given up; a claim given up that
// way also gives up its place in the queue. Only the server's error reply
// to the claim itself (the script refused, or the server would not run
// it) ends the wait at once. When ctx ends first, the error matches
// ctx.Err() and the last attempt's error, no claim of this call is left on
// the server, and its place in the queue is given up; as with TryAcquire,
// that cleanup can take up to lease.ReleaseTimeout after ctx ended. A
// waiter that dies without giving up its place holds the lock up, once it
// reaches the head, for at most its ticket's lifetime: max(2 s, 3 × its
// Retry.Max) after its last attempt.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return engine.Start(lk.cfg.Observer, strategy, key).End(lk.acquire(ctx, key, opts, true))
}

// acquire is TryAcquire, or Acquire when wait is set.
func (lk *Locker) acquire(ctx context.Context, key string, opts []option.Option, wait bool) (*lease.Lease, error) {
	o, err := lk.options(ctx, key, lk.cfg.TTL, opts)
	if err != nil {
		return nil, err
	}
	return lk.newClaim(key, o).acquire(ctx, wait)
}

// Close does nothing: a Locker holds no resources of its own between calls,
// and neither releases leases still held nor closes its Node.
func (lk *Locker) Close() error { return nil }

// Nodes returns the one server the Locker runs on, for what lives beside
// its locks (packages permits, claims, rwlock, ratelimit). The slice is
// the caller's; the Node stays whoever built it.
func (lk *Locker) Nodes() []node.Node { return []node.Node{lk.n} }

// strategy names this strategy in Observer events.
const strategy = "single"

// options checks a call's context and key and resolves its opts, a TTL
// of ttl when they set none.
func (lk *Locker) options(ctx context.Context, key string, ttl time.Duration, opts []option.Option) (settings.Call, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return settings.Call{}, err
	}
	return lk.cfg.CallFrom(ttl, opts)
}

// hashKey returns the lock's hash; its channel and every other key of
// the lock are named by appending to it, so they share its cluster slot
// (see keyname.Single, which escapes a key that starts with "}").
func hashKey(key string) string { return keyname.Single(key) }
