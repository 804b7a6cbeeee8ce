package settings

import "time"

// DriftFloor is added to every drift margin: the granularity of the
// servers' expiry, which a very short TTL could not otherwise absorb.
const DriftFloor = 2 * time.Millisecond

// Drift returns the margin a lease of ttl gives up to clock drift:
// ttl*factor + DriftFloor.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + DriftFloor
}
