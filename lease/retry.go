package lease

import (
	"math/rand/v2"
	"time"
)

// Retry paces a blocking acquire. It is a plain value: every acquire draws
// its own random delays from it, so concurrent waiters share no state and
// cannot fall into step.
//
// The delay before attempt n (from 0) is drawn uniformly from
// [b/2, b], where b = min(Max, Min<<n): jittered exponential backoff. A
// waiter also wakes at once when the holder's release is published, so the
// delay matters only when that message is lost or the lock expires.
type Retry struct {
	Min time.Duration // first backoff; default 5ms
	Max time.Duration // largest backoff; default 200ms
}

// DefaultRetry is used when Options.Retry is the zero value.
var DefaultRetry = Retry{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}

// Check returns an *ArgError unless 0 < Min <= Max, or r is the zero value.
func (r Retry) Check() error {
	if r == (Retry{}) {
		return nil
	}
	if r.Min <= 0 || r.Max < r.Min {
		return &ArgError{Arg: "retry", Value: r, Rule: "must have 0 < Min <= Max"}
	}
	return nil
}

// Delay returns a random delay before attempt n.
func (r Retry) Delay(n int) time.Duration {
	if r == (Retry{}) {
		r = DefaultRetry
	}
	b := r.Max
	if n < 32 && r.Min<<n < r.Max && r.Min<<n > 0 {
		b = r.Min << n
	}
	return b/2 + rand.N(b/2+1)
}
