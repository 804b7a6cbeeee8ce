package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/settings"
)

// CheckCall returns an *ArgError when ctx is nil or key cannot name a
// lock: the checks every call on one key begins with.
func CheckCall(ctx context.Context, key string) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	return CheckKey(key)
}

// CheckKey returns an *ArgError when key cannot name a lock.
func CheckKey(key string) error {
	if key == "" {
		return &argerr.Error{Arg: "key", Value: key, Rule: "must not be empty"}
	}
	return nil
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
	if d := settings.Drift(ttl, factor); ttl-d <= d {
		return &argerr.Error{Arg: "ttl", Value: ttl,
			Rule: fmt.Sprintf("must exceed twice the drift margin (%v)", d)}
	}
	return nil
}
