package single

import (
	"embed"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/engine/lua"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, with the functions of the engine's library and of
// lib that it calls: every one that judges a lease reads the server's
// clock once (TIME) and judges it by that; none compares a client's clock
// with it. A fast_*.lua head runs before the clock is read: it answers a
// lock in the lean form (see fast_claim.lua) without it, and what it does
// not answer goes on to the body.
//
//go:embed lua
var luaFS embed.FS

var (
	// claimScript: KEYS the lock's hash; ARGV owner, TTL ms, the hash's
	// lifetime ms (see Locker.keep), and for a blocking waiter its ticket's
	// lifetime ms. Replies the token, or {ms the holder has left, place in
	// the queue}.
	claimScript = lua.Script(lua.Spec{Name: "single/claim", FS: luaFS, Lib: lib, Head: "fast_claim.lua", Body: []string{"claim.lua"}})
	// extendScript: KEYS the hash; ARGV owner, token, TTL ms, the hash's
	// lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = lua.Script(lua.Spec{Name: "single/extend", FS: luaFS, Lib: lib, Head: "fast_extend.lua", Body: []string{"extend.lua"}})
	// releaseScript: KEYS the hash; ARGV owner, token. Replies 1, 0 when it
	// had expired, or the error DLSTALE <attempts>.
	releaseScript = lua.Script(lua.Spec{Name: "single/release", FS: luaFS, Lib: lib, Head: "fast_release.lua", Body: []string{"release.lua"}})
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it (see
	// engine.AbandonKeep). Replies 1 when it released the lock.
	abandonScript = lua.Script(lua.Spec{Name: "single/abandon", FS: luaFS, Lib: lib, Body: []string{"abandon.lua"}})
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = lua.Script(lua.Spec{Name: "single/leave", FS: luaFS, Lib: lib, Body: []string{"leave.lua"}})
	// inspectScript: KEYS the hash. Replies {owner, attempts, ms left}.
	inspectScript = lua.Script(lua.Spec{Name: "single/inspect", FS: luaFS, Lib: lib, Head: "fast_inspect.lua", Body: []string{"inspect.lua"}})
	// forceScript: KEYS the hash; ARGV ms the key keeps its counter, the
	// break's id and ms to remember it (a break sent again runs once).
	// Replies {old owner, old attempts, the break's token, ms the old
	// lease had left}.
	forceScript = lua.Script(lua.Spec{Name: "single/force", FS: luaFS, Lib: lib, Body: []string{"force.lua"}})

	// The same for a set of keys (AcquireAll), KEYS being the hashes.
	// claimAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, and for
	// a blocking waiter its tickets' lifetime ms. Replies the tokens, or
	// {-1, ms the longest holder has left, 1 when queued}.
	claimAllScript = lua.Script(lua.Spec{Name: "single/claim_all", FS: luaFS, Lib: lib, Body: []string{"claim_all.lua"}})
	// extendAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, the
	// tokens. Replies 1, or the error DLSTALE <attempts>.
	extendAllScript = lua.Script(lua.Spec{Name: "single/extend_all", FS: luaFS, Lib: lib, Body: []string{"extend_all.lua"}})
	// releaseAllScript: ARGV owner, the tokens. Replies 1, 0 when a lease
	// had expired, or the error DLSTALE <attempts>.
	releaseAllScript = lua.Script(lua.Spec{Name: "single/release_all", FS: luaFS, Lib: lib, Body: []string{"release_all.lua"}})
	// abandonAllScript: ARGV owner, ms to remember it. Replies how many
	// keys it freed.
	abandonAllScript = lua.Script(lua.Spec{Name: "single/abandon_all", FS: luaFS, Lib: lib, Body: []string{"abandon_all.lua"}})
	// leaveAllScript: ARGV owner. Replies how many keys it acted on.
	leaveAllScript = lua.Script(lua.Spec{Name: "single/leave_all", FS: luaFS, Lib: lib, Body: []string{"leave_all.lua"}})
)

// lib is the package's functions a script holds when it calls them: the
// lean form's step to the hash (lean.lua) and the release's hand-over
// (handoff.lua).
var lib = []string{"lean.lua", "handoff.lua"}

// scripts are those the core runs for this package's leases and claims.
var scripts = engine.Scripts{Extend: extendScript, Release: releaseScript, Abandon: abandonScript, Leave: leaveScript}

// setScripts are those the core runs for a set of keys (AcquireAll): its
// release and abandon; the set extends with a script of its own.
var setScripts = engine.Scripts{Release: releaseAllScript, Abandon: abandonAllScript}
