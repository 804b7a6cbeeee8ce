package redlock

import (
	"context"

	"github.com/dlockgo/dlock/node"
)

// TokenFor exposes the token arithmetic to the tests.
var TokenFor = tokenFor

// ErrNotRepaired is the error of a vote from a node that sat out its loss
// but is not repaired yet.
var ErrNotRepaired = errNotRepaired

// Scripts lists every script, for tests that must preload them.
func Scripts() []*node.Script {
	return []*node.Script{acquireScript, acquireTokenScript, commitScript, repairScript, extendScript, releaseScript, leaveScript}
}

// GhostVote runs, on n, the release of owner that a failed attempt sends
// (with the gone record) and then that owner's vote, as a vote held up
// behind a stopped server would land, and returns the vote's status.
func GhostVote(ctx context.Context, n node.Node, key, owner string) (int64, error) {
	ks := newKeySet(key)
	if _, err := n.Eval(ctx, releaseScript, ks.release(), owner, "", "60000", ""); err != nil {
		return 0, err
	}
	r, err := n.Eval(ctx, acquireScript, ks.acquire(false), owner, "60000", "", "0", "0")
	return r.Int(0), err
}

// StatusGone is the status of a vote refused because its owner was given up.
const StatusGone = statusGone
