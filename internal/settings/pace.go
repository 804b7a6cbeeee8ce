package settings

import (
	"math/rand/v2"
	"time"
)

// Pace is the value of the Retry setting: how a blocking acquire paces
// its attempts. It is a plain value: every acquire draws its own random
// delays from it, so concurrent waiters share no state and cannot fall
// into step. New and Call resolve it: 0 < Min <= Max.
//
// The delay before attempt n (from 0) is drawn uniformly from
// [b/2, b], where b = min(Max, Min<<n): jittered exponential backoff. A
// waiter also wakes at once when the holder's release is published, so the
// delay matters only when that message is lost or the lock expires.
type Pace struct {
	Min time.Duration // first backoff
	Max time.Duration // largest backoff
}

// Delay returns a random delay before attempt n.
func (r Pace) Delay(n int) time.Duration {
	b := r.Max
	if n < 32 && r.Min<<n < r.Max && r.Min<<n > 0 {
		b = r.Min << n
	}
	return b/2 + rand.N(b/2+1)
}
