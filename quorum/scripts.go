package quorum

import (
	_ "embed"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/node"
)

// Status of an acquire script's reply.
const (
	statusHeld   = 0 // held by another owner
	statusSet    = 1 // set for the caller's owner
	statusQueued = 2 // free, but promised to an earlier waiter
	statusGone   = 3 // the caller's owner was given up: a late vote, refused
)

// The scripts, in lua/, each with its keys, arguments, replies and
// reasons. Phase 1 is composed: the functions it calls (head.lua, gone.lua,
// epoch.lua, an epoch step and a reply), then vote.lua.
var (
	//go:embed lua/head.lua
	headLua string
	//go:embed lua/gone.lua
	goneLua string
	//go:embed lua/epoch.lua
	epochLua string
	//go:embed lua/epoch_off.lua
	epochOffLua string
	//go:embed lua/epoch_check.lua
	epochCheckLua string
	//go:embed lua/epoch_trust.lua
	epochTrustLua string
	//go:embed lua/reply.lua
	replyLua string
	//go:embed lua/reply_token.lua
	replyTokenLua string
	//go:embed lua/vote.lua
	voteLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/commit.lua
	commitLua string
	//go:embed lua/repair.lua
	repairLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/leave.lua
	leaveLua string

	//go:embed lua/vote_set.lua
	voteSetLua string
	//go:embed lua/reply_set.lua
	replySetLua string
	//go:embed lua/reply_set_token.lua
	replySetTokenLua string
	//go:embed lua/commit_set.lua
	commitSetLua string
	//go:embed lua/extend_set.lua
	extendSetLua string
	//go:embed lua/release_set.lua
	releaseSetLua string
	//go:embed lua/leave_set.lua
	leaveSetLua string
)

// phase1 returns the vote script with an epoch step and a reply.
func phase1(epochStep, reply string) string { return phase1Of(epochStep, reply, voteLua) }

// phase1Of returns a phase 1 script whose body, after the functions it
// calls, is body: vote.lua, or force.lua for a break.
func phase1Of(epochStep, reply, body string) string {
	return headLua + goneLua + epochLua + epochStep + reply + body
}

// The phase 1 scripts, by whether tokens and the lost-data guard are on.
// KEYS: keySet.acquire; ARGV: owner, TTL ms, waiter, its score, its ticket
// life ms. With the guard, a server process runs the trusting one only
// after the checking one (node.NewScriptAfter, epoch_trust.lua).
var (
	acquireScript      = engine.Register("quorum/vote", node.NewScript(phase1(epochOffLua, replyLua)))
	acquireTokenScript = engine.Register("quorum/vote+token", node.NewScript(phase1(epochOffLua, replyTokenLua)))

	acquireGuardedScript = engine.Register("quorum/vote+trust", node.NewScriptAfter(
		engine.Register("quorum/vote+check", node.NewScript(phase1(epochCheckLua, replyLua))),
		phase1(epochTrustLua, replyLua)))
	acquireTokenGuardedScript = engine.Register("quorum/vote+token+trust", node.NewScriptAfter(
		engine.Register("quorum/vote+token+check", node.NewScript(phase1(epochCheckLua, replyTokenLua))),
		phase1(epochTrustLua, replyTokenLua)))
)

// The scripts of an operator's break (ForceRelease): phase 1 with
// force.lua for vote.lua, by whether tokens and the lost-data guard are on.
// A break is rare: with the guard, each checks the epoch against INFO.
var (
	forceScript             = engine.Register("quorum/force", node.NewScript(phase1Of(epochOffLua, replyLua, forceLua)))
	forceTokenScript        = engine.Register("quorum/force+token", node.NewScript(phase1Of(epochOffLua, replyTokenLua, forceLua)))
	forceGuardedScript      = engine.Register("quorum/force+check", node.NewScript(phase1Of(epochCheckLua, replyLua, forceLua)))
	forceTokenGuardedScript = engine.Register("quorum/force+token+check", node.NewScript(phase1Of(epochCheckLua, replyTokenLua, forceLua)))
)

// forceScriptFor is acquireScriptFor for a break.
func forceScriptFor(tokens, guard bool) *node.Script {
	switch {
	case tokens && guard:
		return forceTokenGuardedScript
	case tokens:
		return forceTokenScript
	case guard:
		return forceGuardedScript
	}
	return forceScript
}

// acquireScriptFor returns the phase 1 script of a Locker with or without
// tokens and the guard.
func acquireScriptFor(tokens, guard bool) *node.Script {
	switch {
	case tokens && guard:
		return acquireTokenGuardedScript
	case tokens:
		return acquireTokenScript
	case guard:
		return acquireGuardedScript
	}
	return acquireScript
}

var (
	// commitScript: KEYS keySet.commit; ARGV owner, token, the counter's
	// lifetime ms (Locker.keep). Replies 1, 0 (not the owner) or -1 (the
	// counter is not lower).
	commitScript = engine.Register("quorum/commit", node.NewScript(commitLua))
	// repairScript: KEYS repairKeys; ARGV the epoch record, the floor.
	// Replies 1, or 0 when the record changed.
	repairScript = engine.Register("quorum/repair", node.NewScript(repairLua))
	// extendScript: KEYS keySet.extend; ARGV owner, TTL ms, the counter's
	// lifetime ms. Replies 1 or 0.
	extendScript = engine.Register("quorum/extend", node.NewScript(extendLua))
	// releaseScript: KEYS keySet.release; ARGV owner, channel, ms to
	// remember the owner ('0' not to), waiter, token. Replies 1 (deleted),
	// 2 (gone, the counter still at the token) or 0.
	releaseScript = engine.Register("quorum/release", node.NewScript(releaseLua))
	// leaveScript: KEYS the first four of keySet.release; ARGV waiter,
	// channel. Replies 1.
	leaveScript = engine.Register("quorum/leave", node.NewScript(leaveLua))
)

// phase1Set returns the set's vote script with an epoch step and a reply.
func phase1Set(epochStep, reply string) string {
	return epochLua + epochStep + reply + voteSetLua
}

// The phase 1 scripts of a lease on several locks, as the single lock's
// (above). KEYS: lockSet.vote; ARGV: those of the single lock's, then the
// number of locks.
var (
	acquireSetScript      = engine.Register("quorum/vote_set", node.NewScript(phase1Set(epochOffLua, replySetLua)))
	acquireSetTokenScript = engine.Register("quorum/vote_set+token", node.NewScript(phase1Set(epochOffLua, replySetTokenLua)))

	acquireSetGuardedScript = engine.Register("quorum/vote_set+trust", node.NewScriptAfter(
		engine.Register("quorum/vote_set+check", node.NewScript(phase1Set(epochCheckLua, replySetLua))),
		phase1Set(epochTrustLua, replySetLua)))
	acquireSetTokenGuardedScript = engine.Register("quorum/vote_set+token+trust", node.NewScriptAfter(
		engine.Register("quorum/vote_set+token+check", node.NewScript(phase1Set(epochCheckLua, replySetTokenLua))),
		phase1Set(epochTrustLua, replySetTokenLua)))
)

// acquireSetScriptFor returns the set's phase 1 script of a Locker with or
// without tokens and the guard.
func acquireSetScriptFor(tokens, guard bool) *node.Script {
	switch {
	case tokens && guard:
		return acquireSetTokenGuardedScript
	case tokens:
		return acquireSetTokenScript
	case guard:
		return acquireSetGuardedScript
	}
	return acquireSetScript
}

var (
	// commitSetScript: KEYS lockSet.commit; ARGV owner, the counters'
	// lifetime ms, each lock's token. Replies as commitScript, for the
	// whole set.
	commitSetScript = engine.Register("quorum/commit_set", node.NewScript(commitSetLua))
	// extendSetScript: KEYS lockSet.extend; ARGV owner, TTL ms, the
	// counters' lifetime ms, keys per lock. Replies 1 or 0.
	extendSetScript = engine.Register("quorum/extend_set", node.NewScript(extendSetLua))
	// releaseSetScript: KEYS lockSet.release; ARGV owner, '1' to publish,
	// ms to remember the owner, waiter, then each lock's channel and
	// token. Replies 1 or 0.
	releaseSetScript = engine.Register("quorum/release_set", node.NewScript(releaseSetLua))
	// leaveSetScript: KEYS lockSet.leave; ARGV waiter, each lock's
	// channel. Replies 1.
	leaveSetScript = engine.Register("quorum/leave_set", node.NewScript(leaveSetLua))
)
