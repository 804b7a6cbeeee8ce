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
// WithReplicas narrows. docs/single-lease.md has the scripts, the token
// argument and the fault-by-fault promises.
package single

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/internal/claimcore"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
)

// DefaultTTL is the lease TTL when neither New nor the acquire sets one.
const DefaultTTL = 30 * time.Second

// DefaultIdleTTL is how long a lock's hash, with its fencing counter,
// outlives the last lease on it by default (see WithIdleTTL).
const DefaultIdleTTL = claimcore.DefaultIdleTTL

// ErrReplicas matches every *ReplicaError.
var ErrReplicas = errors.New("single: too few replicas acknowledged the lock")

// ReplicaError reports a claim that fewer replicas than WithReplicas asked
// for acknowledged in time. The claim has been released: no lease is left.
// It matches ErrReplicas with errors.Is.
type ReplicaError struct {
	Key    string
	Acked  int // replicas that acknowledged the claim
	Wanted int // replicas WithReplicas asked for
}

func (e *ReplicaError) Error() string {
	return "single: lock on " + strconv.Quote(e.Key) + " acknowledged by " +
		strconv.Itoa(e.Acked) + " of " + strconv.Itoa(e.Wanted) + " replicas"
}

// Is reports whether target is ErrReplicas.
func (e *ReplicaError) Is(target error) bool { return target == ErrReplicas }

// Option configures a Locker; pass options to New.
type Option func(*config)

// config is the configuration every single-server primitive shares, and
// the replicas a claim waits for.
type config struct {
	claimcore.Base
	replicas       int
	replicaTimeout time.Duration
}

// WithTTL sets the TTL of leases whose acquire does not set one with
// lease.WithTTL. The default is DefaultTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.TTL = ttl } }

// WithIdleTTL sets how long a lock's hash, which keeps the key's fencing
// counter between leases, outlives the last lease on it: d after the end
// of the lease granted or extended last, and at most 1.5 × (TTL + d)
// after it, the hash expires (claims move its expiry only when it falls
// short, not each time: see keep in internal/engine/lua/keep.lua). A key
// locked again later starts its counter afresh from the server's clock in µs
// (the floor every token has), so its tokens still rise as long as that
// clock does not step back past the tokens issued before. Zero selects
// DefaultIdleTTL (a minute: a step back of the server's clock shorter
// than that costs the token order nothing; see docs/single-lease.md); a
// negative d keeps every counter for ever, one per key ever locked, in the
// hash form. A released key in the lean form keeps its counter for d
// exactly; a lease that runs out unreleased takes its counter with it.
func WithIdleTTL(d time.Duration) Option { return func(c *config) { c.Idle = d } }

// WithRetry sets how Acquire paces its attempts by default; lease.WithRetry
// overrides it per acquisition. The default is lease.DefaultRetry.
func WithRetry(r lease.Retry) Option { return func(c *config) { c.Retry = r } }

// WithDriftFactor sets the share of the TTL the client sets aside for its
// clock running slower than the server's, in [0, 0.5); the default is 0.01.
// 2 ms, the granularity of the server's expiry, are always added.
func WithDriftFactor(f float64) Option { return func(c *config) { c.Drift = f } }

// WithReplicas makes every claim wait, on the connection that sent it, until
// n replicas acknowledged it or timeout passed. A claim acknowledged by
// fewer is released: TryAcquire fails with a *ReplicaError, and Acquire
// tries again (when ctx ends first, its error carries the last one). A
// lock a release hands to a waiter is claimed again and waited on too, so
// every lease Acquire returns was acknowledged. This
// narrows, but does not close, the failover window of asynchronous
// replication. Extensions do not wait.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(c *config) { c.replicas, c.replicaTimeout = n, timeout }
}

// WithObserver makes the Locker report every acquisition to o, as an
// AcquireStarted event and then an AcquireEnded event whose Wait is the
// time to the outcome (for Acquire, the whole wait) and whose Err is the
// error returned, and makes every lease it grants report its renewals, its
// loss and its release. Events carry Strategy "single". o is called
// synchronously and must not block. With a nil o (the default) nothing is
// reported and no Event is built.
func WithObserver(o observe.Observer) Option { return func(c *config) { c.Observer = o } }

// Locker grants leases on keys of one server. It implements dlock.Locker and
// is safe for concurrent use.
type Locker struct {
	n      node.Node
	cfg    config
	kit    claimcore.Kit
	setKit claimcore.Kit // for sets of keys (AcquireAll): abandon and release only
}

// New returns a Locker that keeps its locks on n. It returns an
// *lease.ArgError when n is nil or an option is out of range. The Locker
// does not own n: Close leaves it open.
func New(n node.Node, opts ...Option) (*Locker, error) {
	cfg := config{Base: claimcore.NewBase(DefaultTTL)}
	if err := claimcore.Configure(n, &cfg, &cfg.Base, opts); err != nil {
		return nil, err
	}
	if cfg.replicas < 0 {
		return nil, &lease.ArgError{Arg: "replicas", Value: cfg.replicas, Rule: "must be >= 0"}
	}
	if cfg.replicas > 0 && cfg.replicaTimeout <= 0 {
		// WAIT with timeout 0 blocks forever.
		return nil, &lease.ArgError{Arg: "replica timeout", Value: cfg.replicaTimeout, Rule: "must be > 0 when replicas > 0"}
	}
	lk := &Locker{n: n, cfg: cfg}
	lk.kit = claimcore.NewKit(strategy, n, &lk.cfg.Base, scripts)
	lk.setKit = claimcore.NewKit(strategy, n, &lk.cfg.Base, setScripts)
	return lk, nil
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

func (lk *Locker) options(ctx context.Context, key string, opts []lease.Option) (lease.Options, error) {
	o, changed, err := acquire.Options(ctx, key, lease.Options{TTL: lk.cfg.TTL, Retry: lk.cfg.Retry}, opts)
	if err == nil && changed {
		err = acquire.CheckTTL(o.TTL, lk.cfg.Drift)
	}
	return o, err
}

// hashKey returns the lock's hash; its channel and every other key of
// the lock are named by appending to it, so they share its cluster slot
// (see keyname.Single, which escapes a key that starts with "}").
func hashKey(key string) string { return keyname.Single(key) }
