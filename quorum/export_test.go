package quorum

import (
	"context"
	"strconv"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/node"
)

// TokenFor exposes the token arithmetic to the tests.
var TokenFor = tokenFor

// ErrNotRepaired is the error of a vote from a node that sat out its loss
// but is not repaired yet.
var ErrNotRepaired = errNotRepaired

// Scripts lists every script a test may preload: all but those a server
// must run only after their first (NewScriptAfter), which a preload
// would let it run unchecked.
func Scripts() []*node.Script {
	var out []*node.Script
	for _, s := range lua.Scripts("quorum/") {
		if s.Script.First() == nil {
			out = append(out, s.Script)
		}
	}
	return out
}

// GhostVote runs, on n, the release of owner that a failed attempt sends
// (with the gone record) and then that owner's vote, as a vote held up
// behind a stopped server would land, and returns the vote's status.
func GhostVote(ctx context.Context, n node.Node, key, owner string) (int64, error) {
	ks := newKeySet(key)
	if _, err := n.Eval(ctx, releaseScript, ks.release[:], owner, "", "60000", "", ""); err != nil {
		return 0, err
	}
	r, err := n.Eval(ctx, voteScripts.of(false, false), ks.acquire(false), owner, "60000", "", "0", "0")
	return r.Int(0), err
}

// StatusGone is the status of a vote refused because its owner was given up.
const StatusGone = statusGone

// queued replies the score of ARGV[1] in the sorted set KEYS[1].
var queued = node.NewScript("return redis.call('ZSCORE', KEYS[1], ARGV[1])")

// LateVotes runs, on every node of lk, the release that a failed attempt
// of a waiter sends for the attempt's owner, and then that owner's vote
// for the same waiter, as a vote held up behind a stopped server lands.
// It returns each node's answer as an attempt reads it, and on how many
// nodes the waiter holds a ticket afterwards.
func LateVotes(ctx context.Context, lk *Locker, key string) ([]NodeAnswer, int, error) {
	ks := newKeySet(key)
	owner, waiter := engine.NewOwner(), engine.NewOwner()
	tokens := lk.cfg.Tokens
	script := voteScripts.of(tokens, !lk.cfg.Durable)
	answers := make([]NodeAnswer, len(lk.nodes))
	tickets := 0
	for i, n := range lk.nodes {
		if _, err := n.Eval(ctx, releaseScript, ks.release[:], owner, "", "60000", "", ""); err != nil {
			return nil, 0, err
		}
		r, err := n.Eval(ctx, script, ks.acquire(tokens), owner, "60000", waiter, "1", "2000")
		if err != nil {
			return nil, 0, err
		}
		answers[i] = lk.parseVote(i, r, 0).answer
		if r, err := n.Eval(ctx, queued, ks.script[2:3], waiter); err != nil {
			return nil, 0, err
		} else if len(r) > 0 && r[0].Kind != node.Nil {
			tickets++
		}
	}
	return answers, tickets, nil
}

// Vote runs, on n, the vote of owner for waiter (empty for none) with
// waiter's first attempt at score, on key alone or, with more keys, on
// the set of key and them, without tokens or the lost-data guard, and
// returns its status.
func Vote(ctx context.Context, n node.Node, owner, waiter, score, key string, more ...string) (int64, error) {
	if len(more) == 0 {
		r, err := n.Eval(ctx, voteScripts.of(false, false), newKeySet(key).acquire(false), owner, "60000", waiter, score, "2000")
		return r.Int(0), err
	}
	keys := append([]string{key}, more...)
	r, err := n.Eval(ctx, voteSetScripts.of(false, false), newLockSet(keys, false).vote, owner, "60000", waiter, score, "2000", strconv.Itoa(len(keys)))
	return r.Int(0), err
}

// Status of a vote's reply.
const (
	StatusSet    = statusSet
	StatusQueued = statusQueued
)

// ReleaseFailed runs, on n, the release a failed attempt of waiter sends
// for owner (lua/release.lua), and returns its reply.
func ReleaseFailed(ctx context.Context, n node.Node, key, owner, waiter string) (int64, error) {
	r, err := n.Eval(ctx, releaseScript, newKeySet(key).release[:], owner, "", "0", "", "", waiter)
	return r.Int(0), err
}

// VoteAttempt runs, on n, the vote of owner for waiter's attempt number
// attempt, its first attempt at score, on key alone, without tokens or the
// lost-data guard, and returns its status.
func VoteAttempt(ctx context.Context, n node.Node, owner, waiter, score string, attempt int, key string) (int64, error) {
	r, err := n.Eval(ctx, voteScripts.of(false, false), newKeySet(key).acquire(false), owner, "60000", waiter, score, "2000", strconv.Itoa(attempt))
	return r.Int(0), err
}

// VoteAttemptTokens is VoteAttempt with tokens: it returns the whole
// reply (lua/vote.lua, lua/reply_token.lua).
func VoteAttemptTokens(ctx context.Context, n node.Node, owner, waiter, score string, attempt int, key string) (node.Reply, error) {
	return n.Eval(ctx, voteScripts.of(true, false), newKeySet(key).acquire(true), owner, "60000", waiter, score, "2000", strconv.Itoa(attempt))
}

// ReleaseLease runs, on n, the release of a lease of owner granted to
// waiter, without a message, and returns its reply.
func ReleaseLease(ctx context.Context, n node.Node, key, owner, waiter string) (int64, error) {
	r, err := n.Eval(ctx, releaseScript, newKeySet(key).release[:], owner, "", "0", waiter, "")
	return r.Int(0), err
}

// Hand runs, on n, the release of a lease of owner that hands the lock
// on (lua/fast_hand.lua, lua/hand.lua), without tokens or the lost-data
// guard: channel is the key's (empty for no message), waiter the one the
// lease was granted to and refused a failed attempt's waiter (empty for
// none). It returns the reply.
func Hand(ctx context.Context, n node.Node, key, owner, channel, waiter, refused string) (int64, error) {
	r, err := n.Eval(ctx, handScripts.of(false, false), newKeySet(key).acquire(false), owner, channel, "0", waiter, "", refused, "-1")
	return r.Int(0), err
}

// Listening returns how many of lk's waiters share key's subscriptions,
// and how many keys lk listens on.
func Listening(lk *Locker, key string) (waiters, keys int) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	if l := lk.listening[key]; l != nil {
		waiters = len(l.waiters)
	}
	return waiters, len(lk.listening)
}
