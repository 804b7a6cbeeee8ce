// Package permits is a distributed semaphore on one Redis or Valkey
// server: up to N permits per name, each a lease of its own, for bounded
// concurrency (at most N workers at once) and rate limiting (at most N
// grants in any window of one TTL, when permits are left to expire rather
// than released).
//
// A permit is a *lease.Lease: it has a TTL judged by the server's clock
// alone, so the permit of a holder that crashed comes back by itself when
// its TTL runs out; it can be extended, renewed in the background
// (option.AutoRenew) and released, and its Done channel closes when it
// ends. Each permit holds one slot of the name, numbered from 0: the
// lowest slot free at the grant, so with one N for a name, slots stay
// below N. The lease's Key is the name and the slot, "NAME#SLOT" (see
// Slot), and its Token is a fencing token: strictly increasing across
// every grant of the name on one server, and floored at the server's
// clock in µs, as the single strategy's tokens are. A resource split in
// slots (a shard, a connection, a worker's partition per slot) fences each
// with the permit's Key and Token (fence.Guard, fence.Store): a holder
// paused past its TTL, whose slot was granted again, is refused.
//
// Acquire waits in a queue on the server, first come first served: a free
// permit goes to the oldest live waiter, never to a newcomer while older
// waiters wait, and a release hands its permit to the queue's head in the
// same script: in its reply when the waiter is the releasing Semaphore's,
// else in a message it publishes, so the waiter holds it without a claim
// of its own. A waiter that died holds the queue up for at most its
// ticket's lifetime, max(2 s, 3 × Retry.Max).
//
// N is each call's own: a call is granted only while fewer than its N
// permits of the name are live, whatever N the holders were granted with;
// a waiter at the head of the queue whose N leaves no room holds up the
// waiters behind it, larger N or not, until enough permits end. Use one N
// per name; changing it is safe (no call is granted beyond its own N) and
// takes effect as the permits granted under the old one end.
//
// Every transition is one Lua script (in lua/, embedded), safe to run
// twice as a client that re-sends a command after a lost reply runs it. A
// claim whose fate is unknown (its context ended, or the exchange failed)
// is given up and its owner refused for a while, so a caller never holds
// a permit it does not know of. What the server keeps for a name is
// bounded by its live holders and waiters, or expires; the counter's hash
// outlives the name's last permit by the idle TTL (option.IdleTTL). The
// server must run with maxmemory-policy noeviction.
//
// There is no quorum form: a semaphore granted by a simple majority of
// independent servers, each capping at N, grants more than N permits.
// docs/permits.md derives the bound, with the guarantee and what each
// fault does to it.
package permits

import (
	"context"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// MaxPermits is the largest N an acquire takes.
const MaxPermits = 10000

// Semaphore grants permits of names on one server. It is safe for
// concurrent use.
type Semaphore struct {
	n     node.Node
	cfg   engine.Base
	kit   engine.Kit
	route router
	// id names the Semaphore in its waiters' tickets, so that its own
	// releases hand them their grants (see serve() in lua/state.lua).
	id string
}

// New returns a Semaphore that keeps its permits on n, configured by
// opts: option.TTL, IdleTTL, Retry, DriftFactor and Observer (whose events
// name this package as their Strategy, "permits"). IdleTTL is how long a
// name's hash, which keeps the name's fencing counter between permits,
// outlives the latest permit granted or extended: between d and 1.5 ×
// (TTL + d). It returns an *lease.ArgError when n is nil or an option does
// not apply or is out of range. The Semaphore does not own n: Close leaves
// it open.
func New(n node.Node, opts ...option.Option) (*Semaphore, error) {
	cfg, err := engine.Configure(n, settings.Permits, opts)
	if err != nil {
		return nil, err
	}
	s := &Semaphore{n: n, cfg: cfg, id: engine.NewOwner()[:16]}
	s.kit = engine.NewKit(strategy, n, &s.cfg, scripts)
	s.route.s = s
	return s, nil
}

// Close does nothing: a Semaphore holds no resources of its own between
// calls, and neither releases permits still held nor closes its Node.
func (s *Semaphore) Close() error { return nil }

// Slot returns the slot of a permit this package granted: its number
// among the name's permits, from 0, read from its Key ("NAME#SLOT"); -1
// for a lease whose Key has no slot.
func Slot(l *lease.Lease) int {
	k := l.Key()
	i := strings.LastIndexByte(k, '#')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(k[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// check checks an acquire's arguments and returns its options.
func (s *Semaphore) check(ctx context.Context, name string, n int, opts []option.Option) (settings.Call, error) {
	if name == "" {
		return settings.Call{}, &lease.ArgError{Arg: "name", Value: name, Rule: "must not be empty"}
	}
	if n < 1 || n > MaxPermits {
		return settings.Call{}, &lease.ArgError{Arg: "n", Value: n,
			Rule: "must be between 1 and " + strconv.Itoa(MaxPermits) + " (permits.MaxPermits)"}
	}
	if err := argerr.CheckContext(ctx); err != nil {
		return settings.Call{}, err
	}
	return s.cfg.Call(opts)
}

// KeyOf returns the server key of name's hash. Every other key of the
// name is that key followed by ":" and a suffix, so that a look at what a
// name keeps on a server (MEMORY USAGE, SCAN) finds it all.
func KeyOf(name string) string { return hashKey(name) }

// hashKey names a name's hash on the server; every other key and the
// channel of the name append to it, so they share its cluster slot. The
// tag is the name, as for a single lock (keyname.Single), under a prefix
// of its own: "dlock:permits:{NAME}".
func hashKey(name string) string {
	return "dlock:permits:" + strings.TrimPrefix(keyname.Single(name), "dlock:")
}
