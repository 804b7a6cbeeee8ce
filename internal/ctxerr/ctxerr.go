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
