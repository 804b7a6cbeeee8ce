package acquire

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/argerr"
)

// DriftFloor is added to every drift margin: the granularity of the
// servers' expiry, which a very short TTL could not otherwise absorb.
const DriftFloor = 2 * time.Millisecond

// Drift returns the margin a lease of ttl gives up to clock drift:
// ttl*factor + DriftFloor.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + DriftFloor
}

// Validity returns how long a lease of ttl is still safe to use once elapsed
// has passed since the request that granted it was sent: ttl - elapsed -
// drift. A result <= 0 means the grant must be treated as failed.
func Validity(ttl, elapsed, drift time.Duration) time.Duration {
	return ttl - elapsed - drift
}

// CheckTTL returns an *ArgError unless ttl leaves room after the drift
// margin: a lease whose whole TTL goes to drift could never be valid.
// Config's check uses it; the options' rules are package settings'.
func CheckTTL(ttl time.Duration, factor float64) error {
	if ttl <= 0 {
		return &argerr.Error{Arg: "ttl", Value: ttl, Rule: "must be > 0"}
	}
	// ttl-d <= d, not ttl <= 2*d: twice the drift of a TTL near the
	// largest Duration overflows.
	if d := Drift(ttl, factor); ttl-d <= d {
		return &argerr.Error{Arg: "ttl", Value: ttl,
			Rule: fmt.Sprintf("must exceed twice the drift margin (%v)", d)}
	}
	return nil
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
