package rwlock

import (
	"embed"

	"github.com/dlockgo/dlock/internal/claimcore"
	"github.com/dlockgo/dlock/internal/engine"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after the core prelude (claimcore.Lua: the
// server's clock, read once, judges every lease and ticket) and
// lua/state.lua.
//
// luaFS holds them, read by claimcore.Script after the core prelude.
//
//go:embed lua
var luaFS embed.FS

var (
	// claimScript: KEYS the lock's hash; ARGV owner, kind ("w" or "r"),
	// TTL ms, the hash's lifetime ms, and for a blocking waiter its
	// ticket's lifetime ms. Replies the token, or {ms until the lease in
	// the way may end, place in the queue}.
	claimScript = engine.Register("rwlock/claim", claimcore.Script(luaFS, "state.lua", "claim.lua"))
	// extendScript: KEYS the hash; ARGV owner, kind, token, TTL ms, the
	// hash's lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = engine.Register("rwlock/extend", claimcore.Script(luaFS, "state.lua", "extend.lua"))
	// releaseScript: KEYS the hash; ARGV owner, kind, token. Replies 1, 0
	// when the lease had ended, or the error DLSTALE <attempts>.
	releaseScript = engine.Register("rwlock/release", claimcore.Script(luaFS, "state.lua", "release.lua"))
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = engine.Register("rwlock/leave", claimcore.Script(luaFS, "state.lua", "leave.lua"))
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it. Replies
	// 1 when it gave up a lease.
	abandonScript = engine.Register("rwlock/abandon", claimcore.Script(luaFS, "state.lua", "abandon.lua"))
	// inspectScript: KEYS the hash. Replies {attempts, writer, its ms
	// left, live readers, the last reader, its ms left}.
	inspectScript = engine.Register("rwlock/inspect", claimcore.Script(luaFS, "state.lua", "inspect.lua"))
)

// scripts are those the core runs for this package's leases and claims.
var scripts = claimcore.Scripts{Extend: extendScript, Release: releaseScript, Abandon: abandonScript, Leave: leaveScript}
