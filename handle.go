package dlock

import (
	"context"
	"fmt"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// ErrForeignHandle means a handle was written by a Locker of another
// strategy or on other servers (see Resume). It also matches ErrInvalid.
var ErrForeignHandle = lease.ErrForeignHandle

// Resumer takes up a lease another Locker, perhaps in another process,
// wrote out as a lease.Handle. *single.Locker, *quorum.Locker and the
// Locker Open returns implement it. An optional interface, so that a
// Locker of one's own (a test double) need not.
type Resumer interface {
	// Resume checks on the servers that the lease h names is still held
	// by its owner, with its token (for the quorum: on a majority, the
	// token being the highest fence counter of the key among them), and
	// returns a lease that extends and releases it, valid for what the
	// servers say it has left. opts may set option.AutoRenew (off by
	// default) and option.TTL (what renewals ask for; h.TTL by default). It fails with an error matching ErrForeignHandle for a
	// handle of another strategy or servers, and ErrNotHeld for one
	// whose lease has ended or whose token is not the lease's. Servers
	// that do not answer make neither: the error then matches neither.
	Resume(ctx context.Context, h lease.Handle, opts ...option.Option) (*lease.Lease, error)
}

// Breaker ends whatever lease holds a key: an operator's break. See
// ForceRelease. *single.Locker, *quorum.Locker and the Locker Open
// returns implement it.
type Breaker interface {
	ForceRelease(ctx context.Context, key string) (lease.Broken, error)
}

var (
	_ Resumer = (*single.Locker)(nil)
	_ Resumer = (*quorum.Locker)(nil)
	_ Resumer = (*opened)(nil)
	_ Breaker = (*single.Locker)(nil)
	_ Breaker = (*quorum.Locker)(nil)
	_ Breaker = (*opened)(nil)
)

// Resume takes up, on l, the lease a handle names: the text of
// lease.Handle.String, written out by (*lease.Lease).Handle in this
// process or another, or printed by `dlock acquire`. The lease must have
// been granted by a Locker of l's strategy on l's servers. A handle that
// is not one, was cut short or edited is an *lease.ArgError naming handle;
// one of another Locker's servers matches ErrForeignHandle (and
// ErrInvalid); one whose lease ended, or whose token was edited (and its
// checksum recomputed), matches ErrNotHeld: the servers hold the token,
// not the handle. When the servers do not answer (for the quorum, too few
// of them to tell), the error does not match ErrNotHeld. The lease
// returned extends, releases and reports its TTL as any lease; it renews
// itself only with option.AutoRenew. l must implement Resumer (both
// strategies do); another Locker is an *lease.ArgError naming locker.
func Resume(ctx context.Context, l Locker, handle string, opts ...option.Option) (*lease.Lease, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return nil, err
	}
	r, ok := l.(Resumer)
	if !ok {
		return nil, &lease.ArgError{Arg: "locker", Value: fmt.Sprintf("%T", l), Rule: "must implement dlock.Resumer (both strategies do)"}
	}
	h, err := lease.ParseHandle(handle)
	if err != nil {
		return nil, err
	}
	return r.Resume(ctx, h, opts...)
}

// ForceRelease is an operator's break: it ends whatever lease holds the
// lock on key, on l's servers, and raises the key's fencing token, as a
// claim of the key followed by its release would: the break's token
// (Broken.Token) is above the old holder's by the argument that orders
// every token of the key. Show it to the fence of the key's resource
// (fence.Guard.Admit, fence.Store.Put) and the old holder's late writes are
// refused; the next holder's token is above it too. Waiters are woken as
// by a release. The old holder's lease ends at its next extension: Extend
// returns an error matching ErrNotHeld, and its auto-renewal ends it with
// ErrLost. Broken says who held the key (owner, metadata, token); a key
// nobody holds gets a new token all the same, and Broken.Held is false.
// The Locker's Observer hears a observe.ForceReleased event. l must
// implement Breaker (both strategies do); another Locker is an
// *lease.ArgError naming locker.
func ForceRelease(ctx context.Context, l Locker, key string) (lease.Broken, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return lease.Broken{}, err
	}
	b, ok := l.(Breaker)
	if !ok {
		return lease.Broken{}, &lease.ArgError{Arg: "locker", Value: fmt.Sprintf("%T", l), Rule: "must implement dlock.Breaker (both strategies do)"}
	}
	return b.ForceRelease(ctx, key)
}
