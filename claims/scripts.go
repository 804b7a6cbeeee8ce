package claims

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine/lua"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, with the functions of the engine's library and of
// lua/items.lua that it calls. KEYS is always the queue's items hash
// alone; the queue's other keys are named by appending to it (see
// lua/items.lua). Every lease is judged by the server's TIME, read once
// at the start of the scripts that judge one (the engine's clock); no
// client clock is sent. Add, Retry and Complete judge none, and go
// without it: its TIME call and arithmetic were a sixth of their time on
// the server.
//
//go:embed lua
var luaFS embed.FS

// lib is the package's functions a script holds when it calls them.
var lib = []string{"items.lua"}

var (
	// addScript: ARGV the ids. Replies how many were added.
	addScript = lua.Script(lua.Spec{Name: "claims/add", FS: luaFS, Lib: lib, Body: []string{"add.lua"}})
	// claimScript: ARGV owner, TTL ms. Replies {id, token, count}, or the
	// ms until the next lease ends (-1: none; -2: the owner was abandoned).
	claimScript = lua.Script(lua.Spec{Name: "claims/claim", FS: luaFS, Lib: lib, Body: []string{"claim.lua"}})
	// completeScript: ARGV id, owner, token, done record ms, token floor
	// ms ("0": for ever). Replies 1, or the error DLSTALE <token>.
	completeScript = lua.Script(lua.Spec{Name: "claims/complete", FS: luaFS, Lib: lib, Body: []string{"complete.lua"}})
	// retryScript: ARGV id, owner, token. Replies 1, or the error DLSTALE
	// <token>.
	retryScript = lua.Script(lua.Spec{Name: "claims/retry", FS: luaFS, Lib: lib, Body: []string{"retry.lua"}})
	// extendScript: ARGV id, owner, token, TTL ms. Replies 1, or the error
	// DLSTALE <token>.
	extendScript = lua.Script(lua.Spec{Name: "claims/extend", FS: luaFS, Lib: lib, Body: []string{"extend.lua"}})
	// abandonScript: ARGV owner, ms to remember it (see engine.AbandonKeep).
	// Replies 1 when it returned an item to the queue.
	abandonScript = lua.Script(lua.Spec{Name: "claims/abandon", FS: luaFS, Lib: lib, Body: []string{"abandon.lua"}})
	// statsScript: no ARGV. Replies {pending, claimed, expired}.
	statsScript = lua.Script(lua.Spec{Name: "claims/stats", FS: luaFS, Lib: lib, Body: []string{"stats.lua"}})
)
