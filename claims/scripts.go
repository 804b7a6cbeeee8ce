package claims

import (
	"embed"

	"github.com/dlockgo/dlock/internal/claimcore"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons. KEYS is always the queue's items hash alone; the
// queue's other keys are named by appending to it (see lua/queue.lua).
// Every lease is judged by the server's TIME, read once by the core
// prelude (claimcore.Lua) each script starts with; no client clock is sent.
//
// luaFS holds them, read by claimcore.Script after the core prelude.
//
//go:embed lua
var luaFS embed.FS

var (
	// addScript: ARGV the ids. Replies how many were added.
	addScript = claimcore.Script(luaFS, "queue.lua", "add.lua")
	// claimScript: ARGV owner, TTL ms. Replies {id, token, count}, or the
	// ms until the next lease ends (-1: none; -2: the owner was abandoned).
	claimScript = claimcore.Script(luaFS, "queue.lua", "claim.lua")
	// completeScript: ARGV id, owner, token, done record ms, token floor
	// ms (-1: for ever). Replies 1, or the error DLSTALE <token>.
	completeScript = claimcore.Script(luaFS, "queue.lua", "complete.lua")
	// retryScript: ARGV id, owner, token. Replies 1, or the error DLSTALE
	// <token>.
	retryScript = claimcore.Script(luaFS, "queue.lua", "retry.lua")
	// extendScript: ARGV id, owner, token, TTL ms. Replies 1, or the error
	// DLSTALE <token>.
	extendScript = claimcore.Script(luaFS, "queue.lua", "extend.lua")
	// abandonScript: ARGV owner, ms to remember it (see claimcore.AbandonKeep).
	// Replies 1 when it returned an item to the queue.
	abandonScript = claimcore.Script(luaFS, "queue.lua", "abandon.lua")
	// statsScript: no ARGV. Replies {pending, claimed, expired}.
	statsScript = claimcore.Script(luaFS, "stats.lua")
)
