package acquire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// StaleCounter reads a script's refusal "DLSTALE <counter>": the counter
// the server holds for the key (0 when it cannot be read), and whether
// err is such a refusal.
func StaleCounter(err error) (fence.Token, bool) {
	var re *node.ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "DLSTALE ") {
		return 0, false
	}
	h, err := strconv.ParseUint(strings.TrimPrefix(re.Msg, "DLSTALE "), 10, 64)
	if err != nil {
		// ParseUint gives the largest uint64 for a number past it: a
		// counter no server holds, which would call every lease stale.
		return 0, true
	}
	return fence.Token(h), true
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
		return fmt.Errorf("%s: %s on %s: %w", pkg, what, n, CtxErr(ctx, err))
	}
	for _, k := range l.Keys() {
		if h > k.Token {
			return fmt.Errorf("%s: %s: %w: %w", pkg, what, lease.ErrNotHeld,
				&fence.StaleError{Resource: k.Key, Token: k.Token, Highest: h})
		}
	}
	return fmt.Errorf("%s: %s: %w: it expired or was released", pkg, what, lease.ErrNotHeld)
}
