// Package single is the single-node lease strategy: a lock lives on one
// Redis or Valkey server, judged by that server's clock alone, and fenced by
// a counter the server bumps at every claim.
//
// Each key has one hash, dlock:{KEY}, holding the current owner, the end of
// its lease in server milliseconds (until), and the attempts counter. The
// counter is the lease's fencing token. Every claim sets it, atomically, to
//
//	attempts = max(attempts + 1, server TIME in microseconds)
//
// and nothing else touches it. Hence:
//
//   - On one server, tokens of a key strictly increase from lease to lease,
//     whatever that server's clock does (the +1), for as long as the server
//     keeps the hash. Release clears owner and until and leaves the
//     counter; the hash expires once the key has been idle for the idle
//     TTL (WithIdleTTL, a day by default) after the end of its last lease,
//     so keys locked once (per-entity locks, say) do not fill the server.
//   - After that expiry, a failover that lost the latest claims
//     (asynchronous replication), or a restart that lost the counter, the
//     next claim's token is above every token handed out before as long as
//     the server's clock, at that claim, reads later than the lost tokens.
//     A lost token is the old server's clock at its claim (unless the
//     counter already ran ahead of that clock, say after it stepped back),
//     so the condition is: the new server's clock is not behind the old
//     one's by more than the time between the last lost claim and the next
//     claim. Two holders exist after a failover, but the older one's writes
//     are refused by a fence (fence.Guard, fence.Store). A clock further
//     behind can hand out a token at or below a lost one, which no fence
//     can tell apart.
//
// Tokens are microseconds since 1970 in magnitude (about 1.7e15), below
// 2^53, so they are exact in Lua and in any JSON or float64 consumer.
//
// The hash tag is the user's key (escaped when it starts with "}", see
// hashKey), so every key and channel of one lock starts with dlock:{KEY}
// and the strategy runs unchanged on a Redis Cluster. Releases are
// published on dlock:{KEY}:released, which waiting acquirers subscribe to.
// Waiters take turns in the order they came: a blocking acquire that finds
// the lock taken holds a ticket in the queue dlock:{KEY}:q (deadlines in
// dlock:{KEY}:qx), and a free lock goes to the queue's head; both keys
// vanish when the queue empties or its last ticket's deadline passes. An
// acquire abandoned while its claim was in flight (its context ended, or
// the exchange failed) records its owner in dlock:{KEY}:gone for
// max(10 s, 2 × TTL), so that the claim is refused if it reaches the
// server after the cleanup; each record lapses on its own. What the server
// holds for a key is thus one small hash while the key is in use or idle
// for less than the idle TTL, plus a ticket per live waiter and a record
// per acquire abandoned in the last seconds.
//
// Scripts are safe to run twice, as a client that re-sends a command after
// a lost reply (go-redis with its default MaxRetries) runs them: a claim
// run again by its owner returns the grant it made, and a release run
// again after it succeeded succeeds again.
//
// That cleanup (abandon, leaving the queue, releasing a grant the caller
// must not keep) runs on a context of its own, bounded by
// lease.ReleaseTimeout, since the caller's may have ended. Against a
// server that hangs, a cancelled or failed acquire can therefore return up
// to lease.ReleaseTimeout after its context ended: the price of never
// leaving a claim held that the caller does not know of.
//
// The server must run with maxmemory-policy noeviction (the default). An
// evicted lock hash loses the lock, which is then granted again at once,
// and its counter; an evicted dlock:{KEY}:gone lets a late abandoned claim
// hold the lock.
//
// Extend and Release check owner and token. A refusal matches
// lease.ErrNotHeld; when the key has been claimed again since, so that the
// lease's token is older than the key's latest, the error also matches
// fence.ErrStale and carries a *fence.StaleError with the latest token.
//
// A single server is simple and cheap (one round trip to lock, one to
// unlock) but the lock shares the fate of that server: with asynchronous
// replication a failover can grant a lock twice (fenced, as above).
// WithReplicas narrows that window by waiting for replicas to acknowledge
// each claim.
package single

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// DefaultTTL is the lease TTL when neither New nor the acquire sets one.
const DefaultTTL = 30 * time.Second

// DefaultIdleTTL is how long a lock's hash, with its fencing counter,
// outlives the last lease on it by default (see WithIdleTTL).
const DefaultIdleTTL = 24 * time.Hour

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

type config struct {
	ttl            time.Duration
	idle           time.Duration // < 0: for ever
	retry          lease.Retry
	drift          float64
	replicas       int
	replicaTimeout time.Duration
	observer       lease.Observer
}

// WithTTL sets the TTL of leases whose acquire does not set one with
// lease.WithTTL. The default is DefaultTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithIdleTTL sets how long a lock's hash, which keeps the key's fencing
// counter between leases, outlives the last lease on it: d after the end
// of the lease granted or extended last, the hash expires. A key locked
// again later starts its counter afresh from the server's clock in µs
// (the floor every token has), so its tokens still rise as long as that
// clock does not step back past the tokens issued before. Zero selects
// DefaultIdleTTL (a day); a negative d keeps every hash for ever, one per
// key ever locked.
func WithIdleTTL(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithRetry sets how Acquire paces its attempts by default; lease.WithRetry
// overrides it per acquisition. The default is lease.DefaultRetry.
func WithRetry(r lease.Retry) Option { return func(c *config) { c.retry = r } }

// WithDriftFactor sets the share of the TTL the client sets aside for its
// clock running slower than the server's, in [0, 0.5); the default is 0.01.
// 2 ms, the granularity of the server's expiry, are always added.
func WithDriftFactor(f float64) Option { return func(c *config) { c.drift = f } }

// WithReplicas makes every claim wait, on the connection that sent it, until
// n replicas acknowledged it or timeout passed. A claim acknowledged by
// fewer is released: TryAcquire fails with a *ReplicaError, and Acquire
// tries again (when ctx ends first, its error carries the last one). This
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
func WithObserver(o lease.Observer) Option { return func(c *config) { c.observer = o } }

// Locker grants leases on keys of one server. It implements dlock.Locker and
// is safe for concurrent use.
type Locker struct {
	n      node.Node
	cfg    config
	ttlMs  string // cfg.ttl in ms, formatted once
	keepMs string // keep(cfg.ttl), formatted once
}

// New returns a Locker that keeps its locks on n. It returns an
// *lease.ArgError when n is nil or an option is out of range. The Locker
// does not own n: Close leaves it open.
func New(n node.Node, opts ...Option) (*Locker, error) {
	if n == nil {
		return nil, &lease.ArgError{Arg: "node", Value: n, Rule: "must not be nil"}
	}
	cfg := config{ttl: DefaultTTL, drift: acquire.DefaultDriftFactor}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.idle == 0 {
		cfg.idle = DefaultIdleTTL
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
	if cfg.replicas < 0 {
		return nil, &lease.ArgError{Arg: "replicas", Value: cfg.replicas, Rule: "must be >= 0"}
	}
	if cfg.replicas > 0 && cfg.replicaTimeout <= 0 {
		// WAIT with timeout 0 blocks forever.
		return nil, &lease.ArgError{Arg: "replica timeout", Value: cfg.replicaTimeout, Rule: "must be > 0 when replicas > 0"}
	}
	lk := &Locker{n: n, cfg: cfg, ttlMs: strconv.FormatInt(cfg.ttl.Milliseconds(), 10)}
	lk.keepMs = lk.keep(cfg.ttl)
	return lk, nil
}

// keep returns how long, in ms, a lock's hash is kept after a claim or
// extension for ttl: ttl plus the idle TTL, or "0" to keep it for ever.
func (lk *Locker) keep(ttl time.Duration) string {
	if lk.cfg.idle < 0 {
		return "0"
	}
	return strconv.FormatInt((ttl + lk.cfg.idle).Milliseconds(), 10)
}

// Close does nothing: a Locker holds no resources of its own between calls,
// and neither releases leases still held nor closes its Node.
func (lk *Locker) Close() error { return nil }

// hashKey returns the lock's hash; its channel and every other key of
// the lock are named by appending to it, so they share its cluster slot
// (see keyname.Single, which escapes a key that starts with "}").
func hashKey(key string) string { return keyname.Single(key) }

// serverNow is the Lua snippet that reads the server clock in milliseconds.
const serverNow = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// keepFor is the Lua function that makes the lock's hash expire ms from
// now, or keeps it forever when ms is '0' (see WithIdleTTL).
const keepFor = `local function keep(ms)
  if ms == '0' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ms) end
end
`

// claimScript: KEYS hash; ARGV owner, ttl ms, the hash's lifetime in ms
// ('0' for ever; the TTL plus the idle TTL), and for a waiter (see Acquire)
// the ms its ticket lasts. Replies the new attempts, an integer, when
// claimed, and {ms the holder has left, position} when refused: position
// is the caller's place in the queue of waiters (1 is its head), 0 when it
// is not queued. (A plain integer for the common case costs the clients
// less to read than an array.)
//
// A claim run again by the owner that made it (a client that re-sent it
// after its reply was lost) replies the attempts it was granted: the
// owner holds the lock, and only its own claim could have set it.
//
// Waiters queue in dlock:{KEY}:q, a sorted set of owners scored by a
// sequence, with each ticket's deadline (server ms) in the hash
// dlock:{KEY}:qx and their number in the lock's hash (field waiting,
// absent at 0, so that an uncontended claim or release reads the lock's
// hash alone). A free lock goes to the head of the queue, or to anyone
// when the queue is empty: a claim without a ticket (TryAcquire, a first
// attempt) does not overtake queued waiters. A caller that passes a ticket
// lifetime joins the queue when refused (or refreshes its deadline);
// tickets whose deadline passed are dropped when they reach the head, so a
// waiter that died holds the lock up for one ticket lifetime at most. Both
// queue keys expire with their last ticket's deadline, so the tickets of
// waiters that all died do not outlive them.
//
// An owner whose acquire was abandoned (see abandonScript) is refused
// while its record in dlock:{KEY}:gone lasts, so a claim that reaches the
// server late, after its cleanup, cannot hold the lock. A plain claim on a
// held lock is answered before any other key is read, so that a contender
// for a held lock whose cluster slot is migrating is told it is taken (see
// try); every path reads a key of its own before it writes anything, so a
// source that refuses the look at a key it no longer has refuses before
// the script changed anything.
//
// The new attempts is max(attempts + 1, server time in µs). The +1 keeps
// tokens rising on one server whatever its clock does; the floor keeps
// them rising across a failover that lost the latest claims, or a hash
// that expired after its idle TTL, as long as the server's clock is not
// behind the one that issued the lost tokens by more than the time between
// the lost claim and the next. Lua numbers are doubles, exact for
// integers below 2^53 (µs since 1970 are ~1.7e15, ~2^51; a counter past
// 2^53, which only a hand edit can make, is refused), and %.0f writes
// them back as the decimal integer HINCRBY would have, so extendScript and
// releaseScript still compare tokens as exact strings.
var claimScript = node.NewScript(serverNow + keepFor + `
local q, qx = KEYS[1] .. ':q', KEYS[1] .. ':qx'
local r = redis.call('HMGET', KEYS[1], 'owner', 'until', 'attempts', 'waiting')
local left = 0
if r[1] and r[2] then left = tonumber(r[2]) - now end
if left > 0 then
  if r[1] == ARGV[1] then return tonumber(r[3]) end
  if not ARGV[4] then return {left, 0} end
end
local g = redis.call('ZSCORE', KEYS[1] .. ':gone', ARGV[1])
if g and tonumber(g) > now then
  return {math.max(left, 0), 0}
end
local waiting = tonumber(r[4] or '0')
local counted = waiting
if left <= 0 then
  local a = math.max(tonumber(r[3] or '0') + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if a >= 9007199254740992 then
    return redis.error_reply('DLTOKEN attempts ' .. (r[3] or '0') .. ' is past 2^53')
  end
  local head
  if waiting > 0 then
    head = redis.call('ZRANGE', q, 0, 0)[1]
    while head and head ~= ARGV[1] and tonumber(redis.call('HGET', qx, head) or '0') <= now do
      redis.call('ZREM', q, head)
      redis.call('HDEL', qx, head)
      waiting = waiting - 1
      head = redis.call('ZRANGE', q, 0, 0)[1]
    end
    if not head then waiting = 0 end
  end
  if not head or head == ARGV[1] then
    if head then
      redis.call('ZREM', q, head)
      redis.call('HDEL', qx, head)
      waiting = waiting - 1
    end
    if waiting == 0 and counted > 0 then redis.call('HDEL', KEYS[1], 'waiting') end
    if waiting > 0 and waiting ~= counted then redis.call('HSET', KEYS[1], 'waiting', waiting) end
    redis.call('HSET', KEYS[1], 'attempts', string.format('%.0f', a),
      'owner', ARGV[1], 'until', string.format('%.0f', now + tonumber(ARGV[2])))
    keep(ARGV[3])
    return a
  end
  left = 0
end
local rank
if ARGV[4] then
  rank = redis.call('ZRANK', q, ARGV[1])
  if not rank then
    local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
    redis.call('ZADD', q, tonumber(last[2] or '0') + 1, ARGV[1])
    waiting = redis.call('ZCARD', q)
    rank = waiting - 1
  end
  redis.call('HSET', qx, ARGV[1], string.format('%.0f', now + tonumber(ARGV[4])))
  if redis.call('PTTL', q) < tonumber(ARGV[4]) then
    redis.call('PEXPIRE', q, ARGV[4])
    redis.call('PEXPIRE', qx, ARGV[4])
  end
end
if waiting == 0 and counted > 0 then redis.call('HDEL', KEYS[1], 'waiting') end
if waiting > 0 and waiting ~= counted then redis.call('HSET', KEYS[1], 'waiting', waiting) end
if rank then return {left, rank + 1} end
return {left, 0}
`)

// extendScript: KEYS hash; ARGV owner, token, ttl ms, the hash's lifetime
// in ms (as for claimScript). Replies 1, or DLSTALE <attempts> unless
// owner and token match and the lease is still running: an expired lease
// is never revived.
var extendScript = node.NewScript(serverNow + keepFor + `
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or not r[3] or tonumber(r[3]) <= now then
  return redis.error_reply('DLSTALE ' .. (r[2] or '0'))
end
redis.call('HSET', KEYS[1], 'until', string.format('%.0f', now + tonumber(ARGV[3])))
keep(ARGV[4])
return 1
`)

// releaseScript: KEYS hash; ARGV owner, token. Replies 1 when released, 0
// when it was ours but had expired (cleared all the same), DLSTALE
// <attempts> when it is not ours. A release run again after it succeeded
// (a client that re-sent it after its reply was lost) finds no owner and
// the key not claimed since, and replies 1 again. The release is published
// only when the queue holds a ticket (the hash's waiting field, kept by
// the other scripts, is there): every blocking waiter holds one from its
// first attempt on, before it subscribes, and a waiter without one polls.
var releaseScript = node.NewScript(serverNow + `
local r = redis.call('HMGET', KEYS[1], 'owner', 'attempts', 'until', 'waiting')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then
  if not r[1] and r[2] == ARGV[2] then return 1 end
  return redis.error_reply('DLSTALE ' .. (r[2] or '0'))
end
redis.call('HDEL', KEYS[1], 'owner', 'until')
if r[4] then redis.call('PUBLISH', KEYS[1] .. ':released', '') end
if tonumber(r[3]) <= now then return 0 end
return 1
`)

// abandonScript: KEYS hash; ARGV owner, ms to remember it. Gives up an
// acquire whose claim may or may not have landed, and may still be in
// flight: it releases the lock if owner holds it, records owner in
// dlock:{KEY}:gone so that claimScript refuses it if it arrives later, and
// drops owner's ticket from the queue of waiters (see leaveScript).
//
// The gone record is a sorted set of owners scored by the server time
// (ms) until which each is refused: each record lapses on its own,
// records that lapsed are dropped whenever one is added, and the key
// expires with its last record, so it holds no more than the owners
// abandoned within the last ARGV[2] ms.
//
// The release comes first: while a cluster slot migrates, a source that
// still has the hash but not the :gone key refuses the script's touch of
// :gone, and the release has then been done all the same (and the ticket
// expires by its deadline).
var abandonScript = node.NewScript(serverNow + `
local released = 0
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'owner', 'until')
  redis.call('PUBLISH', KEYS[1] .. ':released', '')
  released = 1
end
local gone = KEYS[1] .. ':gone'
redis.call('ZREMRANGEBYSCORE', gone, '-inf', now)
redis.call('ZADD', gone, now + tonumber(ARGV[2]), ARGV[1])
if redis.call('PTTL', gone) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', gone, ARGV[2])
end
local q = KEYS[1] .. ':q'
if redis.call('ZREM', q, ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[1] .. ':qx', ARGV[1])
  if redis.call('HINCRBY', KEYS[1], 'waiting', -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'waiting')
  end
  if released == 0 then
    redis.call('PUBLISH', KEYS[1] .. ':released', '')
  end
end
return released
`)

// leaveScript: KEYS hash; ARGV owner. Drops owner's ticket from the queue
// of waiters, for a waiter that gives up, and tells the release channel:
// a free lock may have been kept for it, and the waiters behind it count
// signals to know their turn (see claim.wait).
// Replies 1 when there was a ticket, else 0.
var leaveScript = node.NewScript(`
if redis.call('ZREM', KEYS[1] .. ':q', ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1] .. ':qx', ARGV[1])
if redis.call('HINCRBY', KEYS[1], 'waiting', -1) <= 0 then
  redis.call('HDEL', KEYS[1], 'waiting')
end
redis.call('PUBLISH', KEYS[1] .. ':released', '')
return 1
`)

// abandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that after its abandon, held up in a network path or behind a
// paused server, holds the lock for its TTL under an owner nobody uses. That
// costs the key one TTL of availability, never a second holder. A claim and
// its abandon held up in one paused server both run within moments of its
// resuming.
const abandonKeep = 10 * time.Second

// TryAcquire makes one attempt at the lock on key. It returns an error
// matching lease.ErrTaken when another owner holds it, and an
// *lease.ArgError for a bad key or option. When ctx ends during the
// attempt, or the exchange with the server fails, a claim that may have
// landed is released before it returns, on a context of its own bounded
// by lease.ReleaseTimeout: against a hung server the call can return up
// to that long after ctx ended.
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
	l, _, err := lk.newClaim(key, o).try(ctx)
	return l, err
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
	c := lk.newClaim(key, o)
	life := acquire.TicketLife(o.Retry)
	c.args[3] = strconv.FormatInt(life.Milliseconds(), 10)
	c.nargs = 4
	l, _, err := c.again(ctx)
	if err == nil {
		return l, nil
	}
	if err := settled(ctx, err); err != nil {
		c.leave()
		return nil, err
	}
	// Subscribed before the next attempt, so a release between that
	// attempt and the wait still wakes us. A subscription that hangs (the
	// server went away meanwhile) must not outlast the ticket.
	sctx, cancel := context.WithTimeout(ctx, life/2)
	wake, stop, serr := lk.n.Subscribe(sctx, c.keys[0]+":released")
	cancel()
	if serr != nil {
		if ctx.Err() != nil {
			c.leave()
			return nil, acquire.GaveUp(ctx, err)
		}
		wake, stop = nil, func() {} // poll without the hint
	}
	defer stop()
	l, err = c.wait(ctx, wake, err)
	if err != nil {
		c.leave()
	}
	return l, err
}

// wait is acquire.Wait for a queued waiter, after a first attempt that
// failed with last: it calls again until a lease, an error that settles
// the acquire (see settled), or the end of ctx. Between attempts it sleeps
// a delay from the retry policy, cut short by the holder's time left and
// by a release on wake.
//
// Each release (or waiter leaving) moves the queue on by one, so a waiter
// in place p is not served before p-1 more of them: it lets p-2 signals
// pass without asking the server, and asks one signal early, which absorbs
// one signal lost or coalesced. It keeps the timer through those signals,
// so a count that went wrong (a dead waiter's ticket dropped, signals
// lost) costs at most one delay of the retry policy.
func (c *claim) wait(ctx context.Context, wake <-chan struct{}, last error) (*lease.Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; ; n++ {
		l, hint, err := c.again(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// ctx cut this attempt short: the one before tells why the
			// wait ran out.
			return nil, acquire.GaveUp(ctx, last)
		}
		if err := settled(ctx, err); err != nil {
			return nil, err
		}
		last = err
		d := c.o.Retry.Delay(n)
		if hint > 0 && hint < d {
			d = hint
		}
		timer.Reset(d)
		for skip := max(0, c.pos-2); ; skip-- {
			select {
			case <-ctx.Done():
				return nil, acquire.GaveUp(ctx, err)
			case <-timer.C:
			case <-wake:
				if skip > 0 {
					continue
				}
			}
			break
		}
	}
}

// settled returns the error that ends a blocking acquire after an attempt
// failed with err, or nil to try again: Acquire gives up on an error reply
// from the server (to the claim, or to the WAIT after it) and on the end
// of ctx, and retries everything else (the lock taken, a lost connection
// or timeout whose claim was abandoned, too few replicas, a slot in
// migration).
func settled(ctx context.Context, err error) error {
	var (
		r  *refusal
		re *node.ReplyError
	)
	if errors.As(err, &r) {
		return err
	}
	if errors.As(err, &re) && !errors.Is(err, errMigrating) {
		// The server refused part of the exchange (a WAIT the user may
		// not run, say): the claim was abandoned, and trying again would
		// meet the same refusal until ctx ends.
		return err
	}
	if ctx.Err() == nil {
		return nil
	}
	if !errors.Is(err, lease.ErrTaken) && errors.Is(err, ctx.Err()) {
		return err
	}
	return acquire.GaveUp(ctx, err)
}

// strategy names this strategy in Observer events.
const strategy = "single"

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
		if err := acquire.CheckTTL(o.TTL, lk.cfg.drift); err != nil {
			return o, err
		}
		if err := o.Retry.Check(); err != nil {
			return o, err
		}
	}
	return o, nil
}

// claim is one acquisition: its attempts, and then the lease.Backend of
// the lease it was granted. Its key and argument slices are built once for
// all the server calls of the acquisition and the lease; the Lease
// serialises the Backend calls, and no attempt runs once it exists.
type claim struct {
	lk   *Locker
	key  string
	o    lease.Options
	ttl  time.Duration   // o.TTL in whole milliseconds, as the server gets it
	ids  strings.Builder // the hash key, owner and token, in one allocation
	keys [1]string       // the hash
	// The claim script's arguments: owner, TTL ms, the hash's lifetime ms
	// and, for Acquire, the ticket's lifetime ms.
	args  [4]string
	nargs int       // args sent with a claim: 3, or 4 to join the queue when refused
	held  [2]string // once granted: the owner and its token, as extend and release send them
	queue bool      // a refusal put the owner in the queue, and no grant or leave took it out since
	pos   int       // the owner's place in the queue at the last refusal, 1 for its head
}

// errMigrating marks a claim refused because the lock's cluster slot is
// migrating; Acquire tries again.
var errMigrating = errors.New("single: cluster slot migrating")

// refusal is the server's error reply to a claim: the script refused, or
// the server would not run it, and nothing was written. It is the one
// failure of an attempt that Acquire does not retry.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// errLate is the cause of a claim granted after its validity had run out
// on the way: it has been released again.
var errLate = errors.New("single: granted after its validity ran out on the way")

func (lk *Locker) newClaim(key string, o lease.Options) *claim {
	c := &claim{lk: lk, key: key, o: o, nargs: 3}
	ms := o.TTL.Milliseconds()
	c.ttl = time.Duration(ms) * time.Millisecond
	if o.TTL == lk.cfg.ttl {
		c.args[1], c.args[2] = lk.ttlMs, lk.keepMs
	} else {
		c.args[1], c.args[2] = strconv.FormatInt(ms, 10), lk.keep(c.ttl)
	}
	// The key, the owner and (setToken) the token are slices of one
	// buffer: strings the Builder returned stay valid as it grows.
	c.ids.Grow(len(key) + len("dlock:%{}") + 2*ownerBytes + maxTokenDigits)
	if strings.HasPrefix(key, "}") {
		c.ids.WriteString(hashKey(key)) // see hashKey
	} else {
		c.ids.WriteString("dlock:{")
		c.ids.WriteString(key)
		c.ids.WriteByte('}')
	}
	c.keys[0] = c.ids.String()
	c.drawOwner()
	return c
}

// drawOwner gives the claim a new random owner: at first, and after its
// owner was abandoned, which claimScript refuses from then on.
func (c *claim) drawOwner() {
	var raw [ownerBytes]byte
	var hx [2 * ownerBytes]byte
	rand.Read(raw[:])
	hex.Encode(hx[:], raw[:])
	n := c.ids.Len()
	c.ids.Write(hx[:])
	c.args[0] = c.ids.String()[n:]
}

// ownerBytes is the size of an owner value: 128 bits from crypto/rand,
// unguessable on its own (the lease's owner is what releases it) and
// unique with overwhelming odds. (With the kernel's getrandom vDSO, the
// draw costs well under 1% of a lock+unlock's CPU.)
const ownerBytes = 16

// maxTokenDigits is the length of the largest token in decimal.
const maxTokenDigits = 20

// setToken records the granted token.
func (c *claim) setToken(t fence.Token) {
	n := c.ids.Len()
	var d [maxTokenDigits]byte
	c.ids.Write(strconv.AppendUint(d[:0], uint64(t), 10))
	c.held = [2]string{c.args[0], c.ids.String()[n:]}
}

// again is try for a blocking acquire: a grant that came too late to be
// used is one more attempt that found the lock taken.
func (c *claim) again(ctx context.Context) (*lease.Lease, time.Duration, error) {
	l, hint, err := c.try(ctx)
	if errors.Is(err, errLate) {
		return nil, 0, fmt.Errorf("%w (%w)", lease.ErrTaken, err)
	}
	return l, hint, err
}

// try runs the claim script once. On lease.ErrTaken, hint is how long the
// holder has left. A grant whose validity ran out before its reply arrived
// is released again and reported as an error matching lease.ErrExpired.
func (c *claim) try(ctx context.Context) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, acquire.CtxErr(ctx, err)
	}
	lk := c.lk
	t1 := time.Now()
	var (
		r     node.Reply
		err   error // the server's error reply to the claim itself
		lost  error // the exchange failed: the claim may have run
		acked int
	)
	if lk.cfg.replicas > 0 {
		var res []node.Result
		res, acked, lost = lk.n.Pipeline(ctx,
			[]node.Call{{Script: claimScript, Keys: c.keys[:], Args: c.args[:c.nargs]}},
			node.Wait{Replicas: lk.cfg.replicas, Timeout: lk.cfg.replicaTimeout})
		if lost == nil {
			if len(res) != 1 {
				lost = fmt.Errorf("single: claim on %s: %d results for 1 call", lk.n, len(res))
			} else {
				r, err = res[0].Reply, res[0].Err
			}
		}
	} else {
		r, err = lk.n.Eval(ctx, claimScript, c.keys[:], c.args[:c.nargs]...)
	}
	var re *node.ReplyError
	if err != nil && !errors.As(err, &re) {
		lost, err = err, nil
	}
	if lost != nil {
		// The claim may have landed with its reply lost, or may still be
		// on its way. That includes a pipeline whose WAIT failed, even
		// with an error reply: the claim before it ran all the same.
		c.abandon()
		err := fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, acquire.CtxErr(ctx, lost))
		if ctx.Err() == nil {
			err = acquire.Retryable(err)
		}
		return nil, 0, err
	}
	if err != nil {
		if strings.Contains(re.Msg, "non local key") {
			// The lock's slot is migrating between cluster masters and
			// its hash is still on the source, which refuses the
			// script's look at :gone, a key it does not have. The script
			// had written nothing; once the keys have moved, a new
			// attempt runs on the destination.
			return nil, 0, acquire.Retryable(fmt.Errorf("single: claim %q on %s: %w: %w", c.key, lk.n, errMigrating, err))
		}
		return nil, 0, &refusal{fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, acquire.CtxErr(ctx, err))}
	}
	if len(r) != 1 {
		c.pos = int(r.Int(1))
		c.queue = c.pos > 0
		return nil, time.Duration(r.Int(0)) * time.Millisecond, lease.ErrTaken
	}
	c.queue = false
	token := fence.Token(r.Int(0))
	c.setToken(token)
	if err := ctx.Err(); err != nil {
		// Not every client cuts a call short when ctx ends; a caller that
		// gave up must not be left holding a lock it does not know of.
		c.releaseDetached()
		return nil, 0, fmt.Errorf("single: claim %q on %s: %w", c.key, lk.n, acquire.CtxErr(ctx, err))
	}
	if acked < lk.cfg.replicas {
		c.releaseDetached()
		return nil, 0, &ReplicaError{Key: c.key, Acked: acked, Wanted: lk.cfg.replicas}
	}
	until := t1.Add(c.ttl - acquire.Drift(c.ttl, lk.cfg.drift))
	if !time.Now().Before(until) {
		c.releaseDetached()
		return nil, 0, fmt.Errorf("single: lock on %q: %w: %w", c.key, errLate, lease.ErrExpired)
	}
	return lease.New(c, lease.Grant{
		Key: c.key, Owner: c.args[0], Token: token, TTL: c.o.TTL, Until: until,
		Strategy: strategy, Observer: lk.cfg.observer, AutoRenew: c.o.AutoRenew,
	}), 0, nil
}

// abandon gives up the claim whether or not it landed, on a context of its
// own: the caller's may have ended already.
func (c *claim) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	keep := max(abandonKeep, 2*c.ttl).Milliseconds()
	_, _ = c.lk.n.Eval(ctx, abandonScript, c.keys[:], c.args[0], strconv.FormatInt(keep, 10))
	c.queue = false
	c.drawOwner()
}

// leave gives up the claim's place in the queue, if it has one, on a
// context of its own: the caller's may have ended already. A ticket whose
// leave is lost expires by its deadline.
func (c *claim) leave() {
	if !c.queue {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	_, _ = c.lk.n.Eval(ctx, leaveScript, c.keys[:], c.args[0])
	c.queue = false
}

// releaseDetached releases a granted claim the caller must not keep, on a
// context of its own: the caller's may have ended already.
func (c *claim) releaseDetached() {
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	_, _ = c.lk.n.Eval(ctx, releaseScript, c.keys[:], c.held[:]...)
}

// Extend implements lease.Backend.
func (c *claim) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return time.Time{}, &lease.ArgError{Arg: "ttl", Value: ttl, Rule: "must be at least 1ms"}
	}
	ttl = time.Duration(ms) * time.Millisecond
	t1 := time.Now()
	_, err := c.lk.n.Eval(ctx, extendScript, c.keys[:], c.held[0], c.held[1], strconv.FormatInt(ms, 10), c.lk.keep(ttl))
	if err != nil {
		return time.Time{}, c.refused("extend", l, ctx, err)
	}
	return t1.Add(ttl - acquire.Drift(ttl, c.lk.cfg.drift)), nil
}

// Release implements lease.Backend.
func (c *claim) Release(ctx context.Context, l *lease.Lease) error {
	r, err := c.lk.n.Eval(ctx, releaseScript, c.keys[:], c.held[:]...)
	if err != nil {
		return c.refused("release", l, ctx, err)
	}
	if r.Int(0) != 1 {
		return fmt.Errorf("single: release %q: %w: it had expired", l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// refused maps a DLSTALE reply to an error matching lease.ErrNotHeld, and
// also fence.ErrStale when the key has been claimed again since l's claim;
// other errors keep their context error recognisable.
func (c *claim) refused(op string, l *lease.Lease, ctx context.Context, err error) error {
	var re *node.ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "DLSTALE ") {
		return fmt.Errorf("single: %s %q on %s: %w", op, l.Key(), c.lk.n, acquire.CtxErr(ctx, err))
	}
	h, _ := strconv.ParseUint(strings.TrimPrefix(re.Msg, "DLSTALE "), 10, 64)
	if fence.Token(h) > l.Token() {
		return fmt.Errorf("single: %s %q: %w: %w", op, l.Key(), lease.ErrNotHeld,
			&fence.StaleError{Resource: l.Key(), Token: l.Token(), Highest: fence.Token(h)})
	}
	return fmt.Errorf("single: %s %q: %w: it expired or was released", op, l.Key(), lease.ErrNotHeld)
}
