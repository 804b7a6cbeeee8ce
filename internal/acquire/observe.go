package acquire

import (
	"time"

	"github.com/dlockgo/dlock/lease"
)

// Observation is one acquisition as an Observer hears it: AcquireStarted
// when it begins (Start), AcquireEnded with the time it took and its error
// when it ends (End). With a nil Observer it reports nothing and builds no
// Event.
type Observation struct {
	o        lease.Observer
	strategy string
	key      string
	start    time.Time
}

// Start reports to o that an acquisition of key by strategy began.
func Start(o lease.Observer, strategy, key string) Observation {
	if o == nil {
		return Observation{}
	}
	ob := Observation{o: o, strategy: strategy, key: key, start: time.Now()}
	o.Observe(lease.Event{Kind: lease.AcquireStarted, Strategy: strategy, Key: key})
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
		ob.o.Observe(lease.Event{Kind: lease.AcquireEnded, Strategy: ob.strategy, Key: key, Wait: time.Since(ob.start), Err: err})
	}
	return l, err
}
