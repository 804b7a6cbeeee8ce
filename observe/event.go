package observe

import (
	"context"
	"errors"
	"time"

	"github.com/dlockgo/dlock/lease"
)

// Observer hears about the life of locks: acquisitions, per-node votes,
// renewals, losses and releases, operators' breaks, and the failovers of
// a master followed through Sentinels. It is called synchronously on the
// path it reports, so it must return quickly and never block; a nil
// Observer costs nothing. Events carry no owner values or tokens: they name keys and nodes.
type Observer interface {
	Observe(Event)
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// AcquireStarted: an Acquire or TryAcquire began.
	AcquireStarted EventKind = iota + 1
	// AcquireEnded: it ended; Wait is how long it took, Err its outcome.
	AcquireEnded
	// Vote: one node answered one attempt of a quorum acquisition; Node
	// names it, Outcome says how it voted, Wait is its round trip.
	Vote
	// Renewed: an extension ended; Err is nil when the servers agreed.
	Renewed
	// Lost: the lease ended before Release; Err is the cause (lease.ErrLost or
	// lease.ErrExpired).
	Lost
	// Released: a Release ended a lease that had not ended before; Err is
	// its error, if any.
	Released
	// MasterChanged: a Locker that follows a master through its Sentinels
	// (dlock.Config.SentinelMaster) connected to a master at an address
	// other than the one it used before: a failover, as its client saw
	// it. Node is the new master's address; Key is empty. It is reported
	// once per client and change, when the client first connects there,
	// not when the Sentinels promote: a Locker that makes no call hears
	// of none.
	MasterChanged
	// ForceReleased: an operator's break (ForceRelease) ended
	// whatever lease held Key and raised its token; Err is its error, if
	// any. Reported by the Locker that broke it, whether or not a lease
	// held the key.
	ForceReleased
	// RateDecided: a rate limit's call (package ratelimit: Allow, AllowN,
	// Wait, WaitN) ended. Strategy is "ratelimit", Key the limit's key,
	// Outcome "allowed", "refused", "invalid", "canceled" or "error"
	// (RateOutcome), Wait the call's time (a Wait's, its sleeps
	// included), Err its error. A Wait reports once, not once per try.
	RateDecided
)

func (k EventKind) String() string {
	switch k {
	case AcquireStarted:
		return "acquire_started"
	case AcquireEnded:
		return "acquire_ended"
	case Vote:
		return "vote"
	case Renewed:
		return "renewed"
	case Lost:
		return "lost"
	case Released:
		return "released"
	case MasterChanged:
		return "master_changed"
	case ForceReleased:
		return "force_released"
	case RateDecided:
		return "rate_decided"
	}
	return "unknown"
}

// Event is one thing an Observer hears.
type Event struct {
	Kind     EventKind
	Strategy string        // "single" or "quorum"; "permits", "rwlock", "claims" or "ratelimit" for those packages
	Key      string        // the lock's key; once granted, the lease's (a permit's NAME#SLOT, a claimed item's id)
	Node     string        // the node, for a Vote; the new master's address, for MasterChanged
	Outcome  string        // a Vote's answer: "ok", "taken", "error", "timeout", "sits_out"; a RateDecided's (RateOutcome)
	Wait     time.Duration // AcquireEnded, RateDecided: time to the outcome; Vote: round trip
	Err      error         // the outcome's error, if any
}

// Outcome names an acquisition's result for metrics: "acquired", "taken",
// "canceled", "invalid" or "error".
func Outcome(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, lease.ErrTaken):
		return "taken"
	case errors.Is(err, lease.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

// RateOutcome names a rate limit call's result for metrics: "allowed" or
// "refused" when the servers decided (allowed says which), else
// "invalid", "canceled" or "error" as Outcome names err.
func RateOutcome(allowed bool, err error) string {
	switch {
	case err != nil:
		return Outcome(err)
	case allowed:
		return "allowed"
	}
	return "refused"
}
