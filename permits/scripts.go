package permits

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/engine/lua"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua and the functions of the
// engine's library that they call (the server's clock, read once, judges
// every permit).
//
//go:embed lua
var luaFS embed.FS

var (
	// claimScript: KEYS the name's hash; ARGV owner, N, TTL ms, the hash's
	// lifetime ms, and for a blocking waiter its ticket's lifetime ms.
	// Replies {token, slot}, or {ms until a permit ends, place, 0}.
	claimScript = lua.Script(lua.Spec{Name: "permits/claim", FS: luaFS, Body: []string{"state.lua", "claim.lua"}})
	// extendScript: KEYS the hash; ARGV owner, token, slot, TTL ms, the
	// hash's lifetime ms. Replies 1, or the error DLSTALE <token>.
	extendScript = lua.Script(lua.Spec{Name: "permits/extend", FS: luaFS, Body: []string{"state.lua", "extend.lua"}})
	// releaseScript: KEYS the hash; ARGV owner, token, slot. Replies 1, 0
	// when it had ended, or the error DLSTALE <token>.
	releaseScript = lua.Script(lua.Spec{Name: "permits/release", FS: luaFS, Body: []string{"state.lua", "release.lua"}})
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when it gave
	// something up.
	leaveScript = lua.Script(lua.Spec{Name: "permits/leave", FS: luaFS, Body: []string{"state.lua", "leave.lua"}})
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it. Replies
	// 1 when it released a permit.
	abandonScript = lua.Script(lua.Spec{Name: "permits/abandon", FS: luaFS, Body: []string{"state.lua", "abandon.lua"}})
)

// scripts are those the core runs for this package's leases and claims.
var scripts = engine.Scripts{Extend: extendScript, Release: releaseScript, Abandon: abandonScript, Leave: leaveScript}
