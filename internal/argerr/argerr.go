// Package argerr holds the error type of a bad argument, so that package
// fence, which package lease builds on, returns the same type. Callers
// know it as lease.ArgError and lease.ErrInvalid.
package argerr

import (
	"context"
	"errors"
	"fmt"
)

// ErrInvalid matches every *Error.
var ErrInvalid = errors.New("dlock: invalid argument")

// Error reports an argument that breaks a rule, at the call that got it.
// It matches ErrInvalid with errors.Is.
type Error struct {
	Arg   string // the argument's name, as the caller wrote it
	Value any    // the value given
	Rule  string // what the value must be
}

func (e *Error) Error() string {
	return fmt.Sprintf("dlock: invalid %s %#v: %s", e.Arg, e.Value, e.Rule)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// CheckContext returns an *Error when ctx is nil.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &Error{Arg: "ctx", Value: nil, Rule: "must not be nil"}
	}
	return nil
}
