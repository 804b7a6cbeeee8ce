package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
)

// Observation is one acquisition as an Observer hears it: AcquireStarted
// when it begins (Start), AcquireEnded with the time it took and its error
// when it ends (End). With a nil Observer it reports nothing and builds no
// Event.
type Observation struct {
	o        observe.Observer
	strategy string
	key      string
	start    time.Time
}

// Start reports to o that an acquisition of key by strategy began.
func Start(o observe.Observer, strategy, key string) Observation {
	if o == nil {
		return Observation{}
	}
	ob := Observation{o: o, strategy: strategy, key: key, start: time.Now()}
	o.Observe(observe.Event{Kind: observe.AcquireStarted, Strategy: strategy, Key: key})
	return ob
}

// End reports the acquisition's outcome, err, and passes l and err through.
// A grant is reported under its lease's key, which the lease's own events
// carry too: a permit's NAME#SLOT, a claimed item's id.
func (ob Observation) End(l *lease.Lease, err error) (*lease.Lease, error) {
	if ob.o != nil {
		key := ob.key
		if l != nil {
			key = l.Key()
		}
		ob.o.Observe(observe.Event{Kind: observe.AcquireEnded, Strategy: ob.strategy, Key: key, Wait: time.Since(ob.start), Err: err})
	}
	return l, err
}

// NewLease hands out the lease for g, backed by b, which implements the
// Extend and Release methods package lease calls on a strategy's side of
// a lease (and Handle, to be written out).
func NewLease(b any, g leasing.Grant) *lease.Lease { return leasing.New(b, g).(*lease.Lease) }

// HandleFor returns nil when h was written by a Locker of strategy on
// servers (named as lease.Handle.Servers names them), and otherwise an
// error matching lease.ErrForeignHandle and lease.ErrInvalid that says
// whose it is.
func HandleFor(h lease.Handle, strategy, servers string) error {
	if h.Strategy == strategy && h.Servers == servers {
		return nil
	}
	return fmt.Errorf("%w: %w", lease.ErrForeignHandle, &lease.ArgError{Arg: "handle", Value: h.Strategy + " on " + h.Servers,
		Rule: "must come from a Locker of the same strategy on the same servers (this one: " + strategy + " on " + servers + ")"})
}

// Forced runs an operator's break of key, fn, after CheckCall, and reports
// its outcome to o as a ForceReleased event.
func Forced(ctx context.Context, o observe.Observer, strategy, key string, fn func(context.Context, string) (lease.Broken, error)) (lease.Broken, error) {
	if err := CheckCall(ctx, key); err != nil {
		return lease.Broken{}, err
	}
	b, err := fn(ctx, key)
	if o != nil {
		o.Observe(observe.Event{Kind: observe.ForceReleased, Strategy: strategy, Key: key, Err: err})
	}
	return b, err
}
