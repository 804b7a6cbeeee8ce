package quorum

import (
	"embed"

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
// reasons. Phase 1 is composed: the functions it calls (head.lua,
// gone.lua, epoch.lua, an epoch step and a reply), then vote.lua.
//
//go:embed lua
var luaFS embed.FS

// phase1 returns the files of a phase 1 script with an epoch step and a
// reply, whose body, after the functions it calls, is body: vote.lua, or
// force.lua for a break.
func phase1(epochStep, reply, body string) []string {
	return []string{"head.lua", "gone.lua", "epoch.lua", epochStep, reply, body}
}

// The phase 1 scripts, by whether tokens and the lost-data guard are on.
// KEYS: keySet.acquire; ARGV: owner, TTL ms, waiter, its score, its ticket
// life ms. With the guard, a server process runs the trusting one only
// after the checking one (node.NewScriptAfter, epoch_trust.lua).
var (
	acquireScript      = engine.Script(engine.Spec{Name: "quorum/vote", FS: luaFS, Body: phase1("epoch_off.lua", "reply.lua", "vote.lua")})
	acquireTokenScript = engine.Script(engine.Spec{Name: "quorum/vote+token", FS: luaFS, Body: phase1("epoch_off.lua", "reply_token.lua", "vote.lua")})

	acquireGuardedScript = engine.Script(engine.Spec{Name: "quorum/vote+trust", FS: luaFS, Body: phase1("epoch_trust.lua", "reply.lua", "vote.lua"),
		After: engine.Script(engine.Spec{Name: "quorum/vote+check", FS: luaFS, Body: phase1("epoch_check.lua", "reply.lua", "vote.lua")})})
	acquireTokenGuardedScript = engine.Script(engine.Spec{Name: "quorum/vote+token+trust", FS: luaFS, Body: phase1("epoch_trust.lua", "reply_token.lua", "vote.lua"),
		After: engine.Script(engine.Spec{Name: "quorum/vote+token+check", FS: luaFS, Body: phase1("epoch_check.lua", "reply_token.lua", "vote.lua")})})
)

// The scripts of an operator's break (ForceRelease): phase 1 with
// force.lua for vote.lua, by whether tokens and the lost-data guard are on.
// A break is rare: with the guard, each checks the epoch against INFO.
var (
	forceScript             = engine.Script(engine.Spec{Name: "quorum/force", FS: luaFS, Body: phase1("epoch_off.lua", "reply.lua", "force.lua")})
	forceTokenScript        = engine.Script(engine.Spec{Name: "quorum/force+token", FS: luaFS, Body: phase1("epoch_off.lua", "reply_token.lua", "force.lua")})
	forceGuardedScript      = engine.Script(engine.Spec{Name: "quorum/force+check", FS: luaFS, Body: phase1("epoch_check.lua", "reply.lua", "force.lua")})
	forceTokenGuardedScript = engine.Script(engine.Spec{Name: "quorum/force+token+check", FS: luaFS, Body: phase1("epoch_check.lua", "reply_token.lua", "force.lua")})
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
	commitScript = engine.Script(engine.Spec{Name: "quorum/commit", FS: luaFS, Body: []string{"commit.lua"}})
	// repairScript: KEYS repairKeys; ARGV the epoch record, the floor.
	// Replies 1, or 0 when the record changed.
	repairScript = engine.Script(engine.Spec{Name: "quorum/repair", FS: luaFS, Body: []string{"repair.lua"}})
	// extendScript: KEYS keySet.extend; ARGV owner, TTL ms, the counter's
	// lifetime ms. Replies 1 or 0.
	extendScript = engine.Script(engine.Spec{Name: "quorum/extend", FS: luaFS, Body: []string{"extend.lua"}})
	// releaseScript: KEYS keySet.release; ARGV owner, channel, ms to
	// remember the owner ('0' not to), waiter, token. Replies 1 (deleted),
	// 2 (gone, the counter still at the token) or 0.
	releaseScript = engine.Script(engine.Spec{Name: "quorum/release", FS: luaFS, Body: []string{"release.lua"}})
	// leaveScript: KEYS the first four of keySet.release; ARGV waiter,
	// channel. Replies 1.
	leaveScript = engine.Script(engine.Spec{Name: "quorum/leave", FS: luaFS, Body: []string{"leave.lua"}})
)

// phase1Set returns the files of the set's vote script with an epoch step
// and a reply.
func phase1Set(epochStep, reply string) []string {
	return []string{"epoch.lua", epochStep, reply, "vote_set.lua"}
}

// The phase 1 scripts of a lease on several locks, as the single lock's
// (above). KEYS: lockSet.vote; ARGV: those of the single lock's, then the
// number of locks.
var (
	acquireSetScript      = engine.Script(engine.Spec{Name: "quorum/vote_set", FS: luaFS, Body: phase1Set("epoch_off.lua", "reply_set.lua")})
	acquireSetTokenScript = engine.Script(engine.Spec{Name: "quorum/vote_set+token", FS: luaFS, Body: phase1Set("epoch_off.lua", "reply_set_token.lua")})

	acquireSetGuardedScript = engine.Script(engine.Spec{Name: "quorum/vote_set+trust", FS: luaFS, Body: phase1Set("epoch_trust.lua", "reply_set.lua"),
		After: engine.Script(engine.Spec{Name: "quorum/vote_set+check", FS: luaFS, Body: phase1Set("epoch_check.lua", "reply_set.lua")})})
	acquireSetTokenGuardedScript = engine.Script(engine.Spec{Name: "quorum/vote_set+token+trust", FS: luaFS, Body: phase1Set("epoch_trust.lua", "reply_set_token.lua"),
		After: engine.Script(engine.Spec{Name: "quorum/vote_set+token+check", FS: luaFS, Body: phase1Set("epoch_check.lua", "reply_set_token.lua")})})
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
	commitSetScript = engine.Script(engine.Spec{Name: "quorum/commit_set", FS: luaFS, Body: []string{"commit_set.lua"}})
	// extendSetScript: KEYS lockSet.extend; ARGV owner, TTL ms, the
	// counters' lifetime ms, keys per lock. Replies 1 or 0.
	extendSetScript = engine.Script(engine.Spec{Name: "quorum/extend_set", FS: luaFS, Body: []string{"extend_set.lua"}})
	// releaseSetScript: KEYS lockSet.release; ARGV owner, '1' to publish,
	// ms to remember the owner, waiter, then each lock's channel and
	// token. Replies 1 or 0.
	releaseSetScript = engine.Script(engine.Spec{Name: "quorum/release_set", FS: luaFS, Body: []string{"release_set.lua"}})
	// leaveSetScript: KEYS lockSet.leave; ARGV waiter, each lock's
	// channel. Replies 1.
	leaveSetScript = engine.Script(engine.Spec{Name: "quorum/leave_set", FS: luaFS, Body: []string{"leave_set.lua"}})
)
