// Package rwlock is a fair, fenced read-write lock on one Redis or Valkey
// server: many readers at once, or one writer, per key.
//
// Every holder, reader or writer, holds a *lease.Lease, as the single
// strategy's: its TTL is judged by the server's clock alone, so the lease
// of a holder that crashed ends by itself; it can be extended, renewed in
// the background (option.AutoRenew) and released, and its Done channel
// closes when it ends.
//
// Waiting is first come, first served, readers and writers in one queue
// per key. A writer enters when nobody holds the lock and nobody waits
// ahead of it; a reader enters when no writer holds it and no writer
// waits ahead of it. So the readers at the head of the queue enter
// together, a reader that arrives after a waiting writer waits behind it
// (writers are not starved), and the readers waiting behind a writer enter
// as soon as it is done (neither are readers). TryAcquire and
// TryAcquireShared never overtake a waiter. A waiter that died holds the
// queue up for at most its ticket's lifetime, max(2 s, 3 × Retry.Max),
// once nothing else does. Waiters wake on a message the server publishes
// when the lock frees up, else when the lease in their way ends, else
// after a delay from the retry policy.
//
// # Tokens
//
// Each key has one fencing counter, set at every writer's grant to
// max(counter + 1, the server's clock in µs): a writer's token is the
// counter's new value, strictly above every token handed out before it.
// The first reader after a writer raises the counter the same way, and
// the readers after it share that token until the next writer: the
// readers' token is above every writer's granted before them, and below
// every writer's granted after. A resource that keeps the highest token
// it has seen (fence.Guard, fence.Store) thus refuses a reader's act once
// a newer writer has written (a reader paused past its lease cannot act on
// a view a newer write has replaced), and refuses the late write of the
// writer before the readers once they have shown it their token (a writer
// paused past its lease cannot write under the readers' feet). Tokens
// tell terms apart, not the readers of one term. A reader that finds no
// counter (the key never written, or its hash expired after the idle TTL)
// starts it at the server's clock in µs, above every earlier token while
// that clock has not stepped back past them.
//
// Every transition is one Lua script (in lua/, embedded), safe to run
// twice as a client that re-sends a command after a lost reply runs it. A
// claim whose fate is unknown (its context ended, or the exchange failed)
// is given up and its owner refused for a while, so a caller never holds a
// lease it does not know of. What the server keeps for a key is bounded by
// its live holders and waiters, or expires; the hash with the counter
// outlives the key's last lease by the idle TTL (option.IdleTTL). The server
// must run with maxmemory-policy noeviction.
//
// There is no quorum form yet: docs/rwlock.md says what one would need,
// with the keys, the scripts and what each fault does.
package rwlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/keyname"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// Locker grants read and write leases on keys of one server. Its
// Acquire, TryAcquire, Inspect and Close make it a dlock.Locker whose
// leases are the writers'. It is safe for concurrent use.
type Locker struct {
	n   node.Node
	cfg engine.Base
	kit engine.Kit
}

// New returns a Locker that keeps its locks on n, configured by opts:
// option.TTL, IdleTTL, Retry, DriftFactor and Observer (whose events name
// this package as their Strategy, "rwlock"). IdleTTL is how long a key's
// hash, which keeps the key's fencing counter between leases, outlives
// the latest lease granted or extended on it: between d and 1.5 × (TTL +
// d). It returns an *lease.ArgError when n is nil or an option does not
// apply or is out of range. The Locker does not own n: Close leaves it
// open.
func New(n node.Node, opts ...option.Option) (*Locker, error) {
	cfg, err := engine.Configure(n, settings.RWLock, opts)
	if err != nil {
		return nil, err
	}
	lk := &Locker{n: n, cfg: cfg}
	lk.kit = engine.NewKit(strategy, n, &lk.cfg, scripts)
	return lk, nil
}

// Close does nothing: a Locker holds no resources of its own between
// calls, and neither releases leases still held nor closes its Node.
func (lk *Locker) Close() error { return nil }

// KeyOf returns the server key of the lock on key: its hash, with the
// fencing counter and the writer. Every other key of the lock is that key
// followed by ":" and a suffix, and shares its cluster hash tag, so that a
// look at what a lock keeps on a server (MEMORY USAGE, SCAN) finds it all.
func KeyOf(key string) string { return keyname.RWLock(key) }

// options checks an acquire's arguments and returns its options.
func (lk *Locker) options(ctx context.Context, key string, opts []option.Option) (settings.Call, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return settings.Call{}, err
	}
	return lk.cfg.Call(opts)
}

// Inspect reports who holds the lock on key as the server sees it now. A
// writer holding it is the Info's owner, with its token and time left.
// While readers hold it, Held is true and Owner, Metadata and TTL are
// those of the reader whose lease ends last (the time until the lock
// could come free, unless readers extend); Token is the readers' token.
// Otherwise Token is the counter, 0 if none. It changes nothing on the
// server.
func (lk *Locker) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return lease.Info{}, err
	}
	r, err := lk.n.Eval(ctx, inspectScript, []string{KeyOf(key)})
	if err != nil {
		return lease.Info{}, fmt.Errorf("rwlock: inspect %q on %s: %w", key, lk.n, ctxerr.Wrap(ctx, err))
	}
	if len(r) != 6 {
		return lease.Info{}, fmt.Errorf("rwlock: inspect %q on %s: a reply of %d values", key, lk.n, len(r))
	}
	tok, err := strconv.ParseUint(r.Str(0), 10, 64)
	if err != nil {
		return lease.Info{}, fmt.Errorf("rwlock: inspect %q on %s: attempts %q: %w", key, lk.n, r.Str(0), err)
	}
	info := lease.Info{Key: key, Token: fence.Token(tok), Quorum: 1}
	switch {
	case r.Str(1) != "" && r.Int(2) > 0:
		info.Held, info.Owner, info.TTL = true, r.Str(1), time.Duration(r.Int(2))*time.Millisecond
	case r.Int(3) > 0 && r.Str(4) != "":
		info.Held, info.Owner, info.TTL = true, r.Str(4), time.Duration(r.Int(5))*time.Millisecond
	}
	info.Metadata = engine.Metadata(info.Owner)
	info.Nodes = []lease.NodeInfo{{Node: lk.n.String(), Owner: info.Owner,
		Metadata: info.Metadata, TTL: info.TTL, Counter: info.Token}}
	return info, nil
}
