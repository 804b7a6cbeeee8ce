package lease

import (
	"errors"

	"github.com/dlockgo/dlock/internal/argerr"
)

// Errors shared by every strategy; the root package dlock re-exports them.
var (
	// ErrTaken means the lock is held by someone else.
	ErrTaken = errors.New("dlock: lock taken")
	// ErrNotHeld means the caller no longer holds the lease it tried to
	// extend or release: it expired, was released, or was lost to another owner.
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrReleased is the cause of a lease's end after Release.
	ErrReleased = errors.New("dlock: lease released")
	// ErrExpired is the cause of a lease's end when its validity ran out by
	// the local clock before it was extended.
	ErrExpired = errors.New("dlock: lease expired")
	// ErrLost is the cause of a lease's end when the servers refused to
	// extend it: another owner holds the lock now.
	ErrLost = errors.New("dlock: lease lost")
	// ErrInvalid matches every *ArgError.
	ErrInvalid = argerr.ErrInvalid
)

// ArgError reports an argument that breaks a rule: Arg names it, Value is
// what was given, Rule what it must be. It matches ErrInvalid.
type ArgError = argerr.Error
