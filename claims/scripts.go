package claims

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons. KEYS is always the queue's items hash alone; the
// queue's other keys are named by appending to it (see lua/queue.lua).
// Every lease is judged by the server's TIME, read once by the prelude of
// the engine's library (engine.Spec.Prelude) that the scripts judging one
// start with; no client clock is sent. Add, Retry and Complete judge
// none, and go without it: its TIME call and arithmetic were a sixth of
// their time on the server.
//
//go:embed lua
var luaFS embed.FS

var (
	// addScript: ARGV the ids. Replies how many were added.
	addScript = engine.Script(engine.Spec{Name: "claims/add", FS: luaFS, Body: []string{"queue.lua", "add.lua"}})
	// claimScript: ARGV owner, TTL ms. Replies {id, token, count}, or the
	// ms until the next lease ends (-1: none; -2: the owner was abandoned).
	claimScript = engine.Script(engine.Spec{Name: "claims/claim", FS: luaFS, Prelude: true, Body: []string{"queue.lua", "claim.lua"}})
	// completeScript: ARGV id, owner, token, done record ms, token floor
	// ms (-1: for ever). Replies 1, or the error DLSTALE <token>.
	completeScript = engine.Script(engine.Spec{Name: "claims/complete", FS: luaFS, Body: []string{"queue.lua", "complete.lua"}})
	// retryScript: ARGV id, owner, token. Replies 1, or the error DLSTALE
	// <token>.
	retryScript = engine.Script(engine.Spec{Name: "claims/retry", FS: luaFS, Body: []string{"queue.lua", "retry.lua"}})
	// extendScript: ARGV id, owner, token, TTL ms. Replies 1, or the error
	// DLSTALE <token>.
	extendScript = engine.Script(engine.Spec{Name: "claims/extend", FS: luaFS, Prelude: true, Body: []string{"queue.lua", "extend.lua"}})
	// abandonScript: ARGV owner, ms to remember it (see claimcore.AbandonKeep).
	// Replies 1 when it returned an item to the queue.
	abandonScript = engine.Script(engine.Spec{Name: "claims/abandon", FS: luaFS, Prelude: true, Body: []string{"queue.lua", "abandon.lua"}})
	// statsScript: no ARGV. Replies {pending, claimed, expired}.
	statsScript = engine.Script(engine.Spec{Name: "claims/stats", FS: luaFS, Prelude: true, Body: []string{"stats.lua"}})
)
