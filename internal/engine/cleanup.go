package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// Detached returns a context with ctx's values but not its end, bounded by
// d: for the cleanup a call owes the servers after its caller gave up.
func Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// Cleanup runs s on n with keys and args on a context detached from ctx,
// bounded by lease.ReleaseTimeout, and ignores the outcome: the cleanup a
// call owes the server after its caller gave up or its exchange failed
// (abandon a claim, leave a queue, release a grant that came too late),
// whose loss the server's own expiry makes good.
func Cleanup(ctx context.Context, n node.Node, s *node.Script, keys []string, args ...string) {
	ctx, cancel := Detached(ctx, lease.ReleaseTimeout)
	defer cancel()
	_, _ = n.Eval(ctx, s, keys, args...)
}

// Refused maps the error of an extend or a release of l on n to what the
// caller sees: a DLSTALE refusal matches lease.ErrNotHeld, and also
// fence.ErrStale, with a *fence.StaleError for the key, when the counter
// is above the token of one of l's keys (the key was granted again since);
// any other error keeps its context error recognisable. pkg is the
// package's error prefix, what names the call ("extend \"k\"").
func Refused(ctx context.Context, pkg, what string, n node.Node, l *lease.Lease, err error) error {
	h, ok := StaleCounter(err)
	if !ok {
		return fmt.Errorf("%s: %s on %s: %w", pkg, what, n, ctxerr.Wrap(ctx, err))
	}
	for _, k := range l.Keys() {
		if h > k.Token {
			return fmt.Errorf("%s: %s: %w: %w", pkg, what, lease.ErrNotHeld,
				&fence.StaleError{Resource: k.Key, Token: k.Token, Highest: h})
		}
	}
	return fmt.Errorf("%s: %s: %w: it expired or was released", pkg, what, lease.ErrNotHeld)
}
