// Package lease is what a caller holds once a lock is granted: a Lease with
// its key, fencing token and validity, the means to extend and release it,
// and a Done channel and Context that end with it; a lease written out for
// another process (Handle); and the errors every strategy returns. What an
// acquisition takes (its TTL, auto-renewal, metadata) is package option's.
//
// A Lease ends exactly once, for one of three causes: ErrReleased after
// Release, ErrExpired when its validity runs out by the local monotonic
// clock, or ErrLost when the servers refused an extension.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/leasing"
)

// backend is a strategy's side of a Lease: how its servers extend and
// release it. Lease serialises calls per lease: Extend and Release are never
// called concurrently for one lease.
type backend interface {
	// Extend asks the servers to keep l for ttl more. It returns the local
	// monotonic instant until which l is then valid, drift taken off. An
	// error matching ErrNotHeld means the servers refused: l is lost.
	Extend(ctx context.Context, l *Lease, ttl time.Duration) (until time.Time, err error)
	// Release gives l up on the servers. It returns an error matching
	// ErrNotHeld when no server still held it.
	Release(ctx context.Context, l *Lease) error
}

func init() {
	leasing.New = func(b any, g leasing.Grant) any { return newLease(b.(backend), g) }
}

// Held is one key of a lease and the fencing token it was granted with.
type Held struct {
	Key   string
	Token fence.Token
}

// ReleaseTimeout bounds a Release whose caller's context has ended, and a
// renewal: what a lease does on a context of its own.
const ReleaseTimeout = 5 * time.Second

// Lease is a held lock. Its methods are safe for concurrent use.
type Lease struct {
	b        backend
	g        leasing.Grant
	extMu    sync.Mutex // serialises backend calls
	released bool       // a Release returned nil; guarded by extMu

	mu      sync.Mutex
	until   time.Time
	cause   error         // set once, when the lease ends
	done    chan struct{} // made by newLease for renewal, else by the first Done
	expiry  *time.Timer   // armed by the first watcher (see watchLocked)
	cancels map[uint64]context.CancelCauseFunc
	nextID  uint64

	renewStop chan struct{} // closed to stop the renewal goroutine
	renewDone chan struct{} // closed by the renewal goroutine when it returns
}

// newLease returns the lease for g, backed by b: the one way a strategy
// hands a Lease to its caller (through leasing.New). With g.AutoRenew it
// starts the lease's renewal goroutine, which ends when the lease does;
// with g.Short, one that extends the lease once and ends (or renews on,
// with g.AutoRenew too). If g.Until has already passed, the lease is born
// expired.
func newLease(b backend, g leasing.Grant) *Lease {
	l := &Lease{b: b, g: g, until: g.Until}
	if g.AutoRenew || g.Reporter != nil {
		l.mu.Lock()
		l.watchLocked()
		l.mu.Unlock()
	}
	if g.AutoRenew || g.Short {
		l.done = make(chan struct{})
		l.renewStop = make(chan struct{})
		l.renewDone = make(chan struct{})
		go l.renew()
	}
	return l
}

// Key returns the lock's key; for a lease on several keys, the first one
// asked for (see Keys).
func (l *Lease) Key() string { return l.g.Key }

// Keys returns every key the lease holds, with its token, in the order
// they were asked for: one for a lease on one key. The slice is the
// caller's own.
func (l *Lease) Keys() []Held {
	if l.g.Set == nil {
		return []Held{{Key: l.g.Key, Token: l.g.Token}}
	}
	out := make([]Held, len(l.g.Set))
	for i, h := range l.g.Set {
		out[i] = Held(h)
	}
	return out
}

// TokenOf returns the fencing token the lease holds key with, and whether
// it holds key: a lease on several keys has a token per key, and a write
// to key's resource carries key's.
func (l *Lease) TokenOf(key string) (fence.Token, bool) {
	if l.g.Set == nil {
		return l.g.Token, key == l.g.Key
	}
	for _, h := range l.g.Set {
		if h.Key == key {
			return h.Token, true
		}
	}
	return 0, false
}

// Owner returns the value that identifies this lease on the servers: 32
// random hex digits, then a space and the metadata when option.Metadata set
// some. Treat it as a secret: whoever knows it can release the lock.
func (l *Lease) Owner() string { return l.g.Owner }

// Metadata returns what option.Metadata stored with the lock; empty for none.
func (l *Lease) Metadata() string { return l.g.Metadata }

// Token returns the lease's fencing token, or 0 when its strategy hands out
// none (see Fenced); for a lease on several keys, the first key's (see
// TokenOf). Tokens of one key strictly increase from lease to lease.
func (l *Lease) Token() fence.Token { return l.g.Token }

// Fenced reports whether the lease carries a fencing token.
func (l *Lease) Fenced() bool { return l.g.Token != 0 }

// TTL returns the validity left by the local monotonic clock, drift already
// taken off; 0 once the lease has ended.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cause != nil {
		return 0
	}
	return max(0, time.Until(l.until))
}

// Done returns a channel closed when the lease ends.
func (l *Lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchLocked()
	return l.doneLocked()
}

// doneLocked returns the channel Done returns, made on first use: most
// leases are released without anyone watching, and the channel would be
// one more allocation per lease.
func (l *Lease) doneLocked() chan struct{} {
	if l.done == nil {
		if l.cause != nil {
			return closedDone
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// closedDone is the Done channel of a lease that ended before anyone asked.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Err returns nil while the lease lasts, then the cause of its end:
// ErrReleased, ErrExpired or ErrLost.
func (l *Lease) Err() error {
	l.mu.Lock()
	cause := l.cause
	expired := cause == nil && !time.Now().Before(l.until)
	l.mu.Unlock()
	if expired {
		l.end(ErrExpired)
		return l.Err()
	}
	return cause
}

// watchLocked arms the expiry timer, so that the lease ends on time for
// those who watch it (Done, Context, renewal, a Reporter). A lease nobody
// watches needs no timer: Err and TTL read the clock.
func (l *Lease) watchLocked() {
	if l.expiry == nil && l.cause == nil {
		l.expiry = time.AfterFunc(time.Until(l.until), l.checkExpiry)
	}
}

// Context returns a context derived from parent that is cancelled, with the
// lease's end as its cause, when the lease ends.
func (l *Lease) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	l.watchLocked()
	if l.cause != nil {
		l.mu.Unlock()
		cancel(l.cause)
		return ctx
	}
	if l.cancels == nil {
		l.cancels = make(map[uint64]context.CancelCauseFunc)
	}
	id := l.nextID
	l.nextID++
	l.cancels[id] = cancel
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		delete(l.cancels, id)
		l.mu.Unlock()
	})
	return ctx
}

// Extend asks the servers to keep the lease for ttl from now, and on success
// restarts its validity. It returns an error matching ErrNotHeld when the
// lease has ended or the servers refused; a refusal ends the lease with
// ErrLost. A lock that already expired on the servers is never revived.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	if ttl <= 0 {
		return &ArgError{Arg: "ttl", Value: ttl, Rule: "must be > 0"}
	}
	l.extMu.Lock()
	defer l.extMu.Unlock()
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	until, err := l.b.Extend(ctx, l, ttl)
	if err != nil {
		if errors.Is(err, ErrNotHeld) {
			l.end(ErrLost)
		}
		return err
	}
	l.mu.Lock()
	cause := l.cause
	if cause == nil {
		l.until = until
		if l.expiry != nil {
			l.expiry.Reset(time.Until(until))
		}
	}
	l.mu.Unlock()
	if cause != nil {
		// The lease ran out by the local clock while the servers were
		// agreeing; it stays ended, and the servers' extension lapses.
		return fmt.Errorf("%w: %w", ErrNotHeld, cause)
	}
	return nil
}

// Release stops the renewal, gives the lock up on the servers (on a
// context of its own, bounded by ReleaseTimeout, when ctx has ended) and
// ends the lease with ErrReleased. It returns an error matching ErrNotHeld
// when no server held the lock any more, or an earlier Release succeeded;
// a Release that failed otherwise may be called again.
func (l *Lease) Release(ctx context.Context) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	l.stopRenewal()
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer cancel()
	}
	l.extMu.Lock()
	if l.released {
		// A strategy may finish a release in the background (quorum nodes
		// past the majority), where a second one would still find the
		// lock and report it held.
		l.extMu.Unlock()
		return fmt.Errorf("%w: released already", ErrNotHeld)
	}
	err := l.b.Release(ctx, l)
	l.released = err == nil
	l.extMu.Unlock()
	_ = l.Err() // a lease that ran out before Release ends as expired
	if l.end(ErrReleased) {
		l.report(leasing.Released, err)
	}
	return err
}

func (l *Lease) stopRenewal() {
	if l.renewStop == nil {
		return
	}
	l.mu.Lock()
	select {
	case <-l.renewStop:
	default:
		close(l.renewStop)
	}
	l.mu.Unlock()
	<-l.renewDone
}

// end ends the lease with cause, once; it reports whether this call did.
func (l *Lease) end(cause error) bool {
	l.mu.Lock()
	if l.cause != nil {
		l.mu.Unlock()
		return false
	}
	l.cause = cause
	if l.expiry != nil {
		l.expiry.Stop()
	}
	if l.done != nil {
		close(l.done)
	}
	for id, cancel := range l.cancels {
		cancel(cause)
		delete(l.cancels, id)
	}
	l.mu.Unlock()
	if cause != ErrReleased {
		l.report(leasing.Lost, cause)
	}
	return true
}

func (l *Lease) report(e leasing.Event, err error) {
	if l.g.Reporter != nil {
		l.g.Reporter.Report(e, l.g.Strategy, l.g.Key, err)
	}
}

// checkExpiry runs when the expiry timer fires; an extension may have moved
// the end of validity since the timer was set.
func (l *Lease) checkExpiry() {
	l.mu.Lock()
	left := time.Until(l.until)
	if l.cause == nil && left > 0 {
		l.expiry.Reset(left)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(ErrExpired)
}

// renew extends the lease at about a third of its TTL until the lease ends
// or Release stops it; a Short lease is extended at once, and without
// AutoRenew only that once. A refusal ends the lease (ErrLost, in Extend);
// a failure that is not a refusal (a timeout, a dead node) is retried
// sooner, until the validity left runs out and the expiry timer ends the
// lease.
func (l *Lease) renew() {
	defer close(l.renewDone)
	every := l.g.TTL / 3
	wait := every
	if l.g.Short {
		wait = 0
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-l.renewStop:
			return
		case <-l.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(ReleaseTimeout, max(l.TTL(), time.Millisecond)))
		err := l.Extend(ctx, l.g.TTL)
		cancel()
		l.report(leasing.Renewed, err)
		wait = every
		if err == nil && !l.g.AutoRenew {
			return
		}
		if err != nil {
			if errors.Is(err, ErrNotHeld) {
				return
			}
			wait = max(min(every/4, l.TTL()/3), time.Millisecond)
		}
		t.Reset(wait)
	}
}
