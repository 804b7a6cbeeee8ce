package quorum

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine/lua"
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
// reasons, with the functions of the engine's library and of lib that it
// calls.
//
//go:embed lua
var luaFS embed.FS

// lib is the package's functions a script holds when it calls them: the
// lost-data guard's judge and epoch (epoch.lua).
var lib = []string{"epoch.lua", "ticket.lua", "counter.lua"}

// variants is one phase 1 script, built for every kind of Locker: by
// whether tokens are on, then whether the lost-data guard is.
type variants [2][2]*node.Script

// of returns the script of a Locker with or without tokens and the guard.
func (v *variants) of(tokens, guard bool) *node.Script { return v[on(tokens)][on(guard)] }

func on(b bool) int {
	if b {
		return 1
	}
	return 0
}

// phase1 builds the variants of a phase 1 script named name: head, when
// not empty, run before the library (lua.Spec's Head), then an epoch
// step, a reply, then body. The epoch step is epoch_off.lua, or with the
// guard epoch_check.lua; the reply replies[0], or with tokens
// replies[1]. With trusted, a server process runs a guarded one's
// trusting form (epoch_trust.lua) only after its checking one
// (node.NewScriptAfter); without, the guarded one checks the epoch
// against INFO at every run. Their names add "+token", and "+check" or
// "+trust".
func phase1(name, head string, body []string, replies [2]string, trusted bool) (v variants) {
	for tokens, reply := range replies {
		n := name
		if tokens == 1 {
			n += "+token"
		}
		spec := func(suffix, step string) lua.Spec {
			return lua.Spec{Name: n + suffix, FS: luaFS, Lib: lib, Head: head, Body: append([]string{step, reply}, body...)}
		}
		v[tokens][0] = lua.Script(spec("", "epoch_off.lua"))
		v[tokens][1] = lua.Script(spec("+check", "epoch_check.lua"))
		if trusted {
			trust := spec("+trust", "epoch_trust.lua")
			trust.After = v[tokens][1]
			v[tokens][1] = lua.Script(trust)
		}
	}
	return v
}

// The phase 1 scripts.
var (
	// voteScripts: a lock's vote. KEYS: keySet.acquire; ARGV: owner, TTL
	// ms, waiter, its score, its ticket life ms.
	voteScripts = phase1("quorum/vote", "", []string{"vote.lua"}, lockReplies, true)
	// forceScripts: an operator's break (ForceRelease), the vote with
	// force.lua for vote.lua. A break is rare: with the guard, each
	// checks the epoch against INFO.
	forceScripts = phase1("quorum/force", "", []string{"force.lua"}, lockReplies, false)
	// voteSetScripts: the vote of a lease on several locks. KEYS:
	// lockSet.vote; ARGV: those of a lock's vote, then the number of
	// locks.
	voteSetScripts = phase1("quorum/vote_set", "", []string{"vote_set.lua"},
		[2]string{"reply_set.lua", "reply_set_token.lua"}, true)

	// handScripts: a lease's release that hands the lock to the queue's
	// head (hand.lua, release.lua). KEYS: keySet.acquire; ARGV:
	// releaseScript's. Each checks the epoch against INFO when it hands
	// the lock over: a release may be a server process's first script.
	// Its head, fast_hand.lua, releases a lock nobody waits for before
	// the clock is read and the vote's functions are defined.
	handScripts = phase1("quorum/hand", "fast_hand.lua", []string{"hand.lua", "release.lua"}, lockReplies, false)

	// lockReplies: their replies, without and with tokens.
	lockReplies = [2]string{"reply.lua", "reply_token.lua"}
)

var (
	// commitScript: KEYS keySet.commit; ARGV owner, token, the counter's
	// lifetime ms (Locker.keep). Replies 1, 0 (not the owner) or -1 (the
	// counter is not lower).
	commitScript = lua.Script(lua.Spec{Name: "quorum/commit", FS: luaFS, Lib: lib, Body: []string{"commit.lua"}})
	// repairScript: KEYS repairKeys; ARGV the epoch record, the floor.
	// Replies 1, or 0 when the record changed.
	repairScript = lua.Script(lua.Spec{Name: "quorum/repair", FS: luaFS, Body: []string{"repair.lua"}})
	// extendScript: KEYS keySet.extend; ARGV owner, TTL ms, the counter's
	// lifetime ms. Replies 1 or 0.
	extendScript = lua.Script(lua.Spec{Name: "quorum/extend", FS: luaFS, Body: []string{"extend.lua"}})
	// releaseScript: KEYS keySet.release; ARGV owner, channel, ms to
	// remember the owner ('0' not to), waiter, token, and a failed
	// attempt's waiter (optional). Replies 1 (deleted), 2 (gone, the
	// counter still at the token) or 0.
	releaseScript = lua.Script(lua.Spec{Name: "quorum/release", FS: luaFS, Lib: lib, Body: []string{"pass.lua", "release.lua"}})
	// leaveScript: KEYS the first four of keySet.release; ARGV waiter,
	// channel. Replies 1.
	leaveScript = lua.Script(lua.Spec{Name: "quorum/leave", FS: luaFS, Lib: lib, Body: []string{"leave.lua"}})
)

var (
	// commitSetScript: KEYS lockSet.commit; ARGV owner, the counters'
	// lifetime ms, each lock's token. Replies as commitScript, for the
	// whole set.
	commitSetScript = lua.Script(lua.Spec{Name: "quorum/commit_set", FS: luaFS, Body: []string{"commit_set.lua"}})
	// extendSetScript: KEYS lockSet.extend; ARGV owner, TTL ms, the
	// counters' lifetime ms, keys per lock. Replies 1 or 0.
	extendSetScript = lua.Script(lua.Spec{Name: "quorum/extend_set", FS: luaFS, Body: []string{"extend_set.lua"}})
	// releaseSetScript: KEYS lockSet.release; ARGV owner, '1' to publish,
	// ms to remember the owner, waiter, then each lock's channel and
	// token. Replies 1 or 0.
	releaseSetScript = lua.Script(lua.Spec{Name: "quorum/release_set", FS: luaFS, Body: []string{"release_set.lua"}})
	// leaveSetScript: KEYS lockSet.leave; ARGV waiter, each lock's
	// channel. Replies 1.
	leaveSetScript = lua.Script(lua.Spec{Name: "quorum/leave_set", FS: luaFS, Body: []string{"leave_set.lua"}})
)
