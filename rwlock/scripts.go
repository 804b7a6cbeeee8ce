package rwlock

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/engine/lua"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua and the functions of the
// engine's library that they call (the server's clock, read once, judges
// every lease and ticket).
//
//go:embed lua
var luaFS embed.FS

var (
	// claimScript: KEYS the lock's hash; ARGV owner, kind ("w" or "r"),
	// TTL ms, the hash's lifetime ms, and for a blocking waiter its
	// ticket's lifetime ms. Replies the token, or {ms until the lease in
	// the way may end, place in the queue}.
	claimScript = lua.Script(lua.Spec{Name: "rwlock/claim", FS: luaFS, Body: []string{"state.lua", "claim.lua"}})
	// extendScript: KEYS the hash; ARGV owner, kind, token, TTL ms, the
	// hash's lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = lua.Script(lua.Spec{Name: "rwlock/extend", FS: luaFS, Body: []string{"state.lua", "extend.lua"}})
	// releaseScript: KEYS the hash; ARGV owner, kind, token. Replies 1, 0
	// when the lease had ended, or the error DLSTALE <attempts>.
	releaseScript = lua.Script(lua.Spec{Name: "rwlock/release", FS: luaFS, Body: []string{"state.lua", "release.lua"}})
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = lua.Script(lua.Spec{Name: "rwlock/leave", FS: luaFS, Body: []string{"state.lua", "leave.lua"}})
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it. Replies
	// 1 when it gave up a lease.
	abandonScript = lua.Script(lua.Spec{Name: "rwlock/abandon", FS: luaFS, Body: []string{"state.lua", "abandon.lua"}})
	// inspectScript: KEYS the hash. Replies {attempts, writer, its ms
	// left, live readers, the last reader, its ms left}.
	inspectScript = lua.Script(lua.Spec{Name: "rwlock/inspect", FS: luaFS, Body: []string{"state.lua", "inspect.lua"}})
)

// scripts are those the core runs for this package's leases and claims.
var scripts = engine.Scripts{Extend: extendScript, Release: releaseScript, Abandon: abandonScript, Leave: leaveScript}
