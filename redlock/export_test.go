package redlock

import (
	"context"
	"errors"

	"github.com/dlockgo/dlock/lease"
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

// AttemptAsGone makes one attempt at key, on behalf of a waiter that has
// already left the queue on every node, and returns each node's answer.
func AttemptAsGone(ctx context.Context, lk *Locker, key string) ([]NodeAnswer, error) {
	ks := newKeySet(key)
	w := &waiter{id: lease.NewOwner(), score: "1", life: "2000", wake: make(chan struct{}, 1)}
	for _, n := range lk.nodes {
		if _, err := n.Eval(ctx, leaveScript, ks.release(), w.id, ks.channel, "60000"); err != nil {
			return nil, err
		}
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	l, _, err := lk.attempt(ctx, ks, lease.Options{TTL: lk.cfg.ttl}, w)
	if l != nil {
		_ = l.Release(ctx)
		return nil, errors.New("granted to a waiter that left")
	}
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return nil, err
	}
	return qe.Nodes, nil
}
