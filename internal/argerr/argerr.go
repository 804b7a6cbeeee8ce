// Package argerr holds the error type of a bad argument, so that package
// fence, which package lease builds on, returns the same type. Callers
// know it as lease.ArgError and lease.ErrInvalid.
package argerr

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	return fmt.Sprintf("dlock: invalid %s %s: %s", e.Arg, value(e.Value), e.Rule)
}

// value formats v as Go syntax, but a duration as the caller would write
// it: 1s, not 1000000000.
func value(v any) string {
	if d, ok := v.(time.Duration); ok {
		return d.String()
	}
	return fmt.Sprintf("%#v", v)
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
