// Package ctxerr keeps a context's end recognisable when a client reports
// it as an error of its own.
package ctxerr

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Wrap returns err matching ctx.Err() with errors.Is once ctx has ended
// (context.DeadlineExceeded once its deadline has passed, even before its
// timer has ended it), as a client's own timeout or cancellation error may
// not; it returns err unchanged when ctx has not ended or err already
// matches, and nil for nil.
func Wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(d) {
		// A client that sets its socket's deadline from the context's
		// times out at that instant, before the context's own timer
		// has ended it.
		cerr = context.DeadlineExceeded
	}
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// Detach returns an error with err's text that matches, by errors.Is and
// errors.As, all that err matches except a context's end
// (context.Canceled, context.DeadlineExceeded); nil for nil. A call to a
// node bounded by a timeout of its own fails with its context's error
// when that timeout passes: that is the node's failure, not the end of
// the caller's context, and an error that reports it must not match the
// caller's deadline. Wrap the detached error with the caller's context
// (Wrap) to match its end when it did end.
func Detach(err error) error {
	if err == nil {
		return nil
	}
	return detached{err}
}

type detached struct{ err error }

func (d detached) Error() string { return d.err.Error() }

// Is matches what the error matches, but a context's end.
func (d detached) Is(target error) bool {
	if target == context.Canceled || target == context.DeadlineExceeded {
		return false
	}
	return errors.Is(d.err, target)
}

// As finds in the error what errors.As finds.
func (d detached) As(target any) bool { return errors.As(d.err, target) }
