// Package claims is a work queue on one Redis or Valkey server whose items
// are handed out under leases: a worker claims the next pending item,
// holds it while its lease runs, and completes it, which removes it for
// good, or returns it to the queue. A worker that dies or stalls loses the
// item when its lease ends, by the server's clock, and the next worker
// claims it.
//
// Every claim of an item raises the item's fencing token, max(token + 1,
// the server's clock in µs), in the same script that hands the item out;
// Complete and Retry are accepted only from the item's latest claim. A
// worker paused past its lease, whose item went to another worker, is
// refused at Complete with an error matching lease.ErrNotHeld and
// fence.ErrStale. So an item is completed at most once, by the holder of
// its latest token, and, while workers keep claiming, at least once: each
// item is completed exactly once, though its work may run more than once
// (make it idempotent, or fence its writes with Claim.Token).
//
// No separate process returns expired claims: each Claim first returns to
// the queue up to 16 claimed items whose lease ended on the server's clock.
// Every transition is one Lua script (in lua/, embedded), safe to run twice
// as a client that re-sends a command after a lost reply runs it; a claim
// whose fate is unknown (its context ended, or the exchange failed) is
// given up, its item returned, so a caller never holds an item it does not
// know of. What the server keeps is bounded by the items in the queue, plus
// two small records per completed item that expire (option.KeepDone,
// option.IdleTTL). The server must
// run with maxmemory-policy noeviction, and persist every write (AOF with
// appendfsync always) if items must survive its restart.
//
// docs/claims.md has the keys, the scripts, the fault-by-fault promises
// and measured throughput.
package claims

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// MaxID is the longest item id Add accepts, in bytes.
const MaxID = 512

// ErrEmpty means no item was pending: every item of the queue is claimed,
// or there is none.
var ErrEmpty = errors.New("claims: no pending item")

// Queue is one named work queue on one server. It is safe for concurrent
// use, holds no resources of its own, and does not own its Node.
type Queue struct {
	n      node.Node
	name   string
	keys   [1]string // the items hash, base of every other key
	cfg    engine.Base
	kit    engine.Kit
	keepMs string // how long a completed item's record stays, in ms
	idleMs string // "0": for ever
}

// New returns the queue called name on n, configured by opts:
// option.TTL, IdleTTL, Retry, DriftFactor, Observer (whose events name
// this package as their Strategy, "claims") and KeepDone. Queues of the
// same name on the same server are the same queue. It returns an
// *lease.ArgError when n is nil, name is empty, or an option does not
// apply or is out of range.
//
// KeepDone is how long a completed item leaves a record on the server:
// its id and token, so that a Complete sent again (by a client after a
// lost reply, or by the caller after a failed call) succeeds again, a late
// Complete of an older claim is told the item was completed under a newer
// token, and Add leaves the id out while the record lives. IdleTTL is how
// long a completed item's id keeps its fencing token on the server, a
// record of some 60 bytes per id: an id added again within that time has
// its tokens go on from where they stopped, whatever the server's clock
// does; an id added again later starts afresh from the server's clock in
// µs. Queues whose ids are never reused can make it short.
func New(n node.Node, name string, opts ...option.Option) (*Queue, error) {
	cfg, err := engine.Configure(n, settings.Claims, opts)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, &lease.ArgError{Arg: "name", Value: name, Rule: "must not be empty"}
	}
	q := &Queue{n: n, name: name, cfg: cfg,
		keepMs: strconv.FormatInt(cfg.KeepDone.Milliseconds(), 10),
		idleMs: "0"}
	if cfg.IdleTTL > 0 {
		q.idleMs = strconv.FormatInt(max(cfg.IdleTTL.Milliseconds(), 1), 10)
	}
	q.kit = engine.NewKit(strategy, n, &q.cfg, engine.Scripts{Abandon: abandonScript})
	q.keys[0] = keyname.Claims(name)
	return q, nil
}

// KeyOf returns the server key of the queue name's items hash. Every other
// key of the queue is that key followed by ":" and a suffix, so that a
// look at what a queue keeps on a server (MEMORY USAGE, SCAN) finds it all.
func KeyOf(name string) string { return keyname.Claims(name) }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// addBatch is how many ids one add script carries: a long Add is split,
// so that no single script holds the server up.
const addBatch = 256

// Add puts the items ids at the back of the queue, in the order given. An
// id already pending or claimed, or completed within the done record's
// lifetime (option.KeepDone), is left as it is, as is a repeat within ids: Add
// is safe to call again after it failed. It returns an *lease.ArgError,
// having added nothing, when an id is empty or longer than MaxID bytes.
// A long list is added in batches of a few hundred, each atomic.
func (q *Queue) Add(ctx context.Context, ids ...string) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	for i, id := range ids {
		if id == "" || len(id) > MaxID {
			return &lease.ArgError{Arg: "ids[" + strconv.Itoa(i) + "]", Value: id,
				Rule: fmt.Sprintf("must be 1 to %d bytes (claims.MaxID)", MaxID)}
		}
	}
	for len(ids) > 0 {
		b := ids[:min(len(ids), addBatch)]
		ids = ids[len(b):]
		if _, err := q.n.Eval(ctx, addScript, q.keys[:], b...); err != nil {
			return fmt.Errorf("claims: add to %q on %s: %w", q.name, q.n, ctxerr.Wrap(ctx, err))
		}
	}
	return nil
}

// Stats counts a queue's items at one instant.
type Stats struct {
	Pending int // waiting to be claimed
	Claimed int // held under a lease, Expired among them
	// Expired counts the claimed items whose lease has ended by the
	// server's clock; the next Claim returns them to the queue.
	Expired int
}

// Stats counts the queue's items. It changes nothing.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return Stats{}, err
	}
	r, err := q.n.Eval(ctx, statsScript, q.keys[:])
	if err != nil {
		return Stats{}, fmt.Errorf("claims: stats of %q on %s: %w", q.name, q.n, ctxerr.Wrap(ctx, err))
	}
	return Stats{Pending: int(r.Int(0)), Claimed: int(r.Int(1)), Expired: int(r.Int(2))}, nil
}

// strategy names claims in lease Observer events.
const strategy = "claims"

// options returns the claim's options: the queue's TTL unless opts set one.
func (q *Queue) options(ctx context.Context, opts []option.Option) (settings.Call, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return settings.Call{}, err
	}
	return q.cfg.Call(opts)
}
