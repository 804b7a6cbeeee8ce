package acquire

import (
	"time"

	"github.com/dlockgo/dlock/lease"
)

// Observe runs acquire and reports it to o: AcquireStarted before,
// AcquireEnded after, with the time it took and its error. With a nil o it
// only runs acquire, and builds no Event.
func Observe(o lease.Observer, strategy, key string, acquire func() (*lease.Lease, error)) (*lease.Lease, error) {
	if o == nil {
		return acquire()
	}
	start := time.Now()
	o.Observe(lease.Event{Kind: lease.AcquireStarted, Strategy: strategy, Key: key})
	l, err := acquire()
	o.Observe(lease.Event{Kind: lease.AcquireEnded, Strategy: strategy, Key: key, Wait: time.Since(start), Err: err})
	return l, err
}
