// Package option holds every setting of dlock's Lockers, primitives and
// calls, each declared once: one Option type, one function per setting,
// named after it. Every constructor takes them (single.New, quorum.New,
// permits.New, claims.New, rwlock.New, ratelimit.New, election.New), and
// so does every acquiring call (Acquire, TryAcquire, AcquireAll,
// TryAcquireAll and Resume of the Lockers, and the primitives'
// acquisitions: permits' Acquire, rwlock's AcquireShared, claims' Claim
// and ClaimWait):
//
//	lk, err := single.New(n, option.TTL(10*time.Second), option.Observer(obs))
//	l, err := lk.Acquire(ctx, "report", option.AutoRenew(true), option.Metadata(host))
//
// A zero duration, factor or count means the default: TTL(0),
// DriftFactor(0), Retry(0, 0), NodeTimeout(0) select the default below;
// at a call, TTL(0) and Retry(0, 0) keep the Locker's. Later options
// override earlier ones.
//
// An Option given where it does not apply (Replicas to quorum.New,
// Metadata to single.New, DurableNodes to a call) is refused: the
// constructor or call returns an *lease.ArgError whose Arg is the
// setting's name and whose Rule says where it applies. A value out of
// range is refused the same way, with its setting's rule. Where each
// setting applies (calls: the acquiring calls), its default and, for a
// setting with a text form, its Param: the parameter of a URL
// (connect.ParseURL) and the key of the dlock command's --config file that
// set it, and, with '-' for '_', the command's flag (--node-timeout).
// dlock.Config (connect.Config) has a field named after each setting with
// a Param, and Observer, with the same default and rule:
//
//	Setting         single  quorum  permits  claims  rwlock  ratelimit  election  calls  Param            Default
//	TTL             x       x       x        x       x                  x         x      ttl              30s
//	IdleTTL         x       x       x        x       x                                   idle_ttl         1m
//	Retry           x       x       x        x       x                  x         x                       5ms..200ms
//	DriftFactor     x       x       x        x       x                                   drift_factor     0.01
//	Observer        x       x       x        x       x       x          x                                 none
//	AutoRenew                                                                     x                       off
//	Metadata                                                                      x                       none
//	Replicas        x                                                                    replicas         0
//	ReplicaTimeout  x                                                                    replica_timeout  0
//	DurableNodes            x                                                            durable          off
//	NodeTimeout             x                                x                           node_timeout     max(50ms, TTL/50) on a quorum; 100ms for a rate limit on several nodes, none on one
//	MaxTTL                  x                                                            max_ttl          the TTL
//	Tokens                  x                                                                             on
//	KeepDone                                 x                                                            1m
package option

import (
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/observe"
)

// Option is one setting's value, made by the functions of this package
// and given to a constructor or an acquiring call. The zero Option does
// nothing.
type Option = settings.Option

// TTL sets how long a lease lives on the servers without an extension:
// the default of a Locker's or a primitive's leases (30s by default), an
// election's terms (by default the Locker's), or one call's lease (by
// default the Locker's). 0 selects the default; a negative d is refused,
// and so is a TTL the Locker cannot serve: one within twice the drift
// margin (d × DriftFactor + 2ms) and, on a quorum, within twice the node
// timeout or above MaxTTL.
func TTL(d time.Duration) Option { return settings.OfDuration(settings.TTL, d) }

// IdleTTL sets how long a key's fence counter outlives the last lease on
// it, for single, quorum, permits, claims and rwlock (1m by default). A
// key locked again later starts its counter afresh from the servers'
// clocks in µs, so its tokens still rise as long as those clocks do not
// step back past the tokens issued before (docs/single-lease.md,
// docs/quorum.md). 0 selects the default; a negative d keeps every
// counter for ever, one per key ever locked.
func IdleTTL(d time.Duration) Option { return settings.OfDuration(settings.IdleTTL, d) }

// Retry sets the pace of a blocking acquire: the delay before attempt n is
// drawn from [b/2, b], b = min(max, min<<n), and a published release
// wakes a waiter at once. It applies to the Lockers and primitives (5ms
// and 200ms by default), to an election's campaigns and to a call (by
// default the Locker's). Retry(0, 0) selects the default; otherwise it
// must have 0 < min <= max.
func Retry(min, max time.Duration) Option { return settings.OfRetry(min, max) }

// DriftFactor sets the share of the TTL a lease sets aside for the
// client's clock running slower than the servers', on top of 2ms (the
// granularity of the servers' expiry), for single, quorum, permits,
// claims and rwlock: 0.01 by default. 0 selects the default; f must be in
// [0, 0.5).
func DriftFactor(f float64) Option { return settings.OfFloat(settings.DriftFactor, f) }

// Observer makes every Locker, primitive, rate limiter and election report
// to o, as package observe describes: acquisitions, a quorum's votes,
// renewals, losses and releases, rate decisions. o is called
// synchronously and must not block. nil, the default, reports nothing and
// builds no Event.
func Observer(o observe.Observer) Option { return settings.OfObserver(o) }

// AutoRenew, at an acquiring call, keeps the lease renewed in the
// background, by one goroutine the lease owns, at about a third of its
// TTL, until Release, or until a renewal is refused, which ends the lease
// with lease.ErrLost. Off by default.
func AutoRenew(on bool) Option { return settings.OfBool(settings.AutoRenew, on) }

// Metadata, at an acquiring call, stores s with the lock while the lease
// holds it, for Inspect and `dlock inspect` to show who holds it: a host,
// a process id, a job. It is at most lease.MaxMetadata bytes. It travels
// with every call the lease makes to the servers, so keep it short.
func Metadata(s string) Option { return settings.OfString(settings.Metadata, s) }

// Replicas makes every claim of single.New's Locker wait, on the
// connection that sent it, until n replicas acknowledged it or timeout
// passed. A claim acknowledged by fewer is released: TryAcquire fails
// with a *single.ReplicaError, and Acquire tries again. A lock a release
// hands to a waiter is claimed again and waited on too. This narrows, but
// does not close, the failover window of asynchronous replication;
// extensions do not wait. Replicas(0, 0), the default, waits for none; n
// > 0 needs timeout > 0, and n == 0 takes no timeout.
func Replicas(n int, timeout time.Duration) Option { return settings.OfReplicas(n, timeout) }

// DurableNodes, for quorum.New, declares that no node ever loses an
// acknowledged write (AOF with appendfsync always, and no flush): the
// lost-data guard is off, so fresh nodes vote at once, with no sit-out
// and no repair. On nodes that do lose writes a restarted node may then
// grant a lock that is still held, and hand out a token already issued.
// Off by default.
func DurableNodes(on bool) Option { return settings.OfBool(settings.DurableNodes, on) }

// NodeTimeout bounds each call to one node, for quorum.New and
// ratelimit.New. On a quorum it must be below half the TTL, of every
// lease (a slow node is left behind, not waited for); by default it is
// max(50ms, TTL/50) of each lease's TTL. A rate limiter's default is
// 100ms on several nodes and none on one, where the caller's context
// alone bounds the call. 0 selects the default; a negative d is refused.
func NodeTimeout(d time.Duration) Option { return settings.OfDuration(settings.NodeTimeout, d) }

// MaxTTL, for quorum.New, sets how long a node that lost its data sits
// out before it is repaired and votes again. It must be at least every
// TTL the Locker's leases use, per call and in Extend included: a longer
// one is refused while the lost-data guard is on. 0, the default, is the
// Locker's TTL.
func MaxTTL(d time.Duration) Option { return settings.OfDuration(settings.MaxTTL, d) }

// Tokens, for quorum.New, turns fencing tokens on (the default) or off:
// Tokens(false) is plain one-phase Redlock, faster, but its leases carry
// no fencing token (Token 0, Fenced false), and an election refuses it.
func Tokens(on bool) Option { return settings.OfBool(settings.Tokens, on) }

// KeepDone, for claims.New, sets how long a completed item leaves a
// record on the server (1m by default): its id and token, so that a
// Complete sent again succeeds again, a late Complete of an older claim
// is told the item was completed under a newer token, and Add leaves the
// id out while the record lives. 0 selects the default; d must otherwise
// be at least 1ms.
func KeepDone(d time.Duration) Option { return settings.OfDuration(settings.KeepDone, d) }
