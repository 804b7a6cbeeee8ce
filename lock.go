// Package dlock is distributed locking on Redis and Valkey, with two
// guarantees behind one interface:
//
//   - single (package single): a lease on one server, judged by that
//     server's clock and fenced by a counter bumped at every claim. Simple
//     and cheap; it shares the fate of its one node and its failover.
//   - quorum (package quorum): the Redlock algorithm across N independent
//     masters, with a fencing token ordered across the quorum. Fault
//     tolerant while a majority of the masters lives.
//
// Both hand out leases with a fencing token (package fence), so the resource
// a lock protects can refuse a holder whose lease ended while it was paused.
// Choose in code (single.New, quorum.New, over Nodes you build) or by
// configuration: Open and OpenURL return a Client, which connects through
// package connect.
package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// Locker grants leases on keys and reports who holds them. Both strategies
// implement it. Throughout
// dlock, a nil context is a bad argument: the call returns an
// *lease.ArgError naming ctx, and does nothing.
type Locker interface {
	// Acquire waits until the lock on key is granted, or ctx ends. Failed
	// attempts are retried (a held lock, a lost connection, nodes down);
	// the single strategy stops at a refusal its server would repeat (an
	// error reply, such as to a command the user may not run), the quorum
	// when so many nodes refuse the credentials (ErrAuth) that a majority
	// is out of reach. When ctx
	// ends first, the error matches ctx.Err() with errors.Is, and no lock
	// of this call is left held on the servers. (Bookkeeping stays: the
	// fence counter, which must outlive every lease, and short-lived
	// records of given-up owners and waiters.)
	Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	// TryAcquire makes exactly one attempt; it returns an error matching
	// ErrTaken when the lock is held by someone else.
	TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	// Inspect reports who holds the lock on key (owner, metadata, fencing
	// token, time left) as the servers see it now, and each server's
	// view: for a quorum, whether a node sits out after a restart and for
	// how long. It changes nothing on the servers.
	Inspect(ctx context.Context, key string) (lease.Info, error)
	// Close releases what the Locker created itself (clients made by Open,
	// subscriptions); it does not release leases still held.
	Close() error
}

// Token is a lease's fencing token (package fence): a writer under the
// lease carries it, and the resource refuses one older than it has seen.
type Token = fence.Token

// The errors every strategy returns, to be matched with errors.Is.
var (
	ErrTaken    = lease.ErrTaken    // held by someone else
	ErrNotHeld  = lease.ErrNotHeld  // extend or release of a lease no longer held
	ErrReleased = lease.ErrReleased // a lease's end: released
	ErrExpired  = lease.ErrExpired  // a lease's end: validity ran out
	ErrLost     = lease.ErrLost     // a lease's end: a renewal was refused
	ErrInvalid  = lease.ErrInvalid  // a bad argument; see *lease.ArgError
	ErrStale    = fence.ErrStale    // a fenced write with an old token
	ErrAuth     = node.ErrAuth      // a server refused the credentials, or wants some
	// ErrForeignHandle: a handle another Locker's servers granted; it
	// also matches ErrInvalid (see Client.Resume).
	ErrForeignHandle = lease.ErrForeignHandle
)

// Do acquires the lock on key, keeps it renewed while fn runs, and releases
// it when fn returns. fn gets a context that is cancelled, with the lease's
// end as its cause, if the lease is lost or expires, and the lease's fencing
// token to carry into every write it fences. Do returns fn's error, joined
// with the release's error if that failed too; if the lease ended before fn
// returned, the error also matches the lease's end (ErrLost or ErrExpired).
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context, token fence.Token) error, opts ...option.Option) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	if l == nil {
		return &lease.ArgError{Arg: "locker", Value: l, Rule: "must not be nil"}
	}
	if fn == nil {
		return &lease.ArgError{Arg: "fn", Value: "nil", Rule: "must not be nil"}
	}
	// A fresh slice: appending to opts could write into the caller's array.
	ls, err := l.Acquire(ctx, key, append(opts[:len(opts):len(opts)], option.AutoRenew(true))...)
	if err != nil {
		return err
	}
	fnErr := fn(ls.Context(ctx), ls.Token())
	ended := ls.Err()
	relErr := ls.Release(ctx)
	if ended != nil {
		// The lease ended under fn: its release can only say "not held".
		return errors.Join(fnErr, fmt.Errorf("dlock: lease on %q ended while fn ran: %w", key, ended))
	}
	return errors.Join(fnErr, relErr)
}
