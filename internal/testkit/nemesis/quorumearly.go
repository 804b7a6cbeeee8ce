package nemesis

import (
	"fmt"
	"sync/atomic"

	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/node"
)

// earlyVoteMs is how early a vote under Config.EarlyGrant treats a quorum
// lock as free: in its last earlyVoteMs ms on the node.
const earlyVoteMs = 100

// The lines of the quorum's vote (quorum/lua/vote.lua) that read the
// lock's time left and judge it free, and what EarlyGrant makes of them:
// the time left judged earlyVoteMs short, for the grant (p == -2 widened
// to every lock in its last earlyVoteMs) and for the hint a refused vote
// gives its waiter, which then asks again in the lock's last earlyVoteMs,
// as the single claim's broken form does.
const (
	voteFree      = "local st, p = 0, redis.call('PTTL', KEYS[1])\nlocal free = p == -2"
	voteFreeEarly = "local st, p = 0, redis.call('PTTL', KEYS[1]) - %d\nlocal free = p < 0"
)

// earlyVote returns the swap, for a plant.Swapping Node, that breaks the
// quorum's vote: the lock judged over earlyVoteMs before its end: a
// Redlock that grants early on every node, the bug Config.EarlyGrant
// plants on the quorum. A vote a server runs after another (the guard's
// trusting form after its checking one) has both broken. Every other
// script runs as it is.
func earlyVote() (func(*node.Script) *node.Script, error) {
	swap, err := plant.Replace(plant.Edit{File: "quorum/lua/vote.lua", Old: voteFree, New: fmt.Sprintf(voteFreeEarly, earlyVoteMs)})
	if err != nil {
		return nil, fmt.Errorf("early vote: %w", err)
	}
	return swap, nil
}

// plantEarly plants Config.EarlyGrant in the nodes of a worker's Locker:
// every node of a quorum runs the early vote (earlyVote), the single
// server the early claim (earlyGrant). swapped counts the calls changed.
func plantEarly(locker string, nodes []node.Node, swapped *atomic.Int64) error {
	if locker != QuorumLocker {
		swap, err := earlyGrant()
		if err != nil {
			return err
		}
		nodes[0] = plant.Swapping(nodes[0], counted(swap, swapped))
		return nil
	}
	swap, err := earlyVote()
	if err != nil {
		return err
	}
	for i, n := range nodes {
		nodes[i] = plant.Swapping(n, counted(swap, swapped))
	}
	return nil
}
