package engine

import (
	"math"
	"strconv"
	"time"
)

// Validity returns how long a lease of ttl is still safe to use once elapsed
// has passed since the request that granted it was sent: ttl - elapsed -
// drift. A result <= 0 means the grant must be treated as failed.
func Validity(ttl, elapsed, drift time.Duration) time.Duration {
	return ttl - elapsed - drift
}

// KeepMs returns how long, in ms, a key's hash is kept after a grant or an
// extension for ttl: ttl plus the idle TTL, or "0" (the scripts' word for
// ever) when idle is negative.
func KeepMs(ttl, idle time.Duration) string {
	if idle < 0 {
		return "0"
	}
	if idle > math.MaxInt64-ttl {
		// The sum overflows: keep it for as long as a Duration lasts,
		// not a negative time, which would drop the hash at once.
		return strconv.FormatInt(time.Duration(math.MaxInt64).Milliseconds(), 10)
	}
	return strconv.FormatInt((ttl + idle).Milliseconds(), 10)
}
