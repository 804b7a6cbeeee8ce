package nemesis

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

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
	voteFree      = "local st, p = 0, redis.call('PTTL', KEYS[1])\nif p == -2 then"
	voteFreeEarly = "local st, p = 0, redis.call('PTTL', KEYS[1]) - %d\nif p < 0 then"
)

// earlyVote breaks the quorum's vote (its swap, for a swapping Node): the lock judged
// over earlyVoteMs before its end: a Redlock that grants early on every
// node, the bug Config.EarlyGrant plants on the quorum. Every other
// script runs as it is. It counts the votes it changed.
type earlyVote struct {
	scripts sync.Map // *node.Script -> *node.Script
	swapped *atomic.Int64
	early   string
}

// newEarlyVote checks vote.lua in the source tree, so that a
// change of the line it breaks fails the run instead of leaving the lock
// unbroken.
func newEarlyVote(swapped *atomic.Int64) (*earlyVote, error) {
	src, err := source("quorum/lua/vote.lua")
	if err != nil {
		return nil, fmt.Errorf("early vote: %w", err)
	}
	if strings.Count(string(src), voteFree) != 1 {
		return nil, fmt.Errorf("early vote: vote.lua no longer has the lines %q once", voteFree)
	}
	return &earlyVote{swapped: swapped, early: fmt.Sprintf(voteFreeEarly, earlyVoteMs)}, nil
}

// swap returns the broken form of s when s is a vote, counting it, else
// s.
func (e *earlyVote) swap(s *node.Script) *node.Script {
	b := e.broken(s)
	if b != s {
		e.swapped.Add(1)
	}
	return b
}

// broken returns the broken form of s when s is a vote, else s. A vote
// that a server runs after another (node.NewScriptAfter: the guard's
// trusting form after its checking one) has both broken.
func (e *earlyVote) broken(s *node.Script) *node.Script {
	if s == nil || !strings.Contains(s.Source(), voteFree) {
		return s
	}
	if b, ok := e.scripts.Load(s); ok {
		return b.(*node.Script)
	}
	src := strings.Replace(s.Source(), voteFree, e.early, 1)
	b := node.NewScript(src)
	if first := s.First(); first != nil {
		b = node.NewScriptAfter(e.broken(first), src)
	}
	b2, _ := e.scripts.LoadOrStore(s, b)
	return b2.(*node.Script)
}

// plantEarly plants Config.EarlyGrant in the nodes of a worker's Locker:
// every node of a quorum runs the early vote (earlyVote), the single
// server the early claim (earlyGrant).
func plantEarly(locker string, nodes []node.Node, swapped *atomic.Int64) error {
	if locker != QuorumLocker {
		g, err := newEarlyGrant(swapped)
		if err != nil {
			return err
		}
		nodes[0] = swapping{nodes[0], g.swap}
		return nil
	}
	v, err := newEarlyVote(swapped)
	if err != nil {
		return err
	}
	for i, n := range nodes {
		nodes[i] = swapping{n, v.swap}
	}
	return nil
}
