package single

import (
	"embed"
	"io/fs"

	"github.com/dlockgo/dlock/internal/claimcore"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after the core prelude (claimcore.Lua): every
// one reads the server's clock once (TIME) and judges every lease by it;
// none compares a client's clock with it.
//
// luaFS holds them, read by claimcore.Script after the core prelude.
//
//go:embed lua
var luaFS embed.FS

var (
	// claimScript: KEYS the lock's hash; ARGV owner, TTL ms, the hash's
	// lifetime ms (see Locker.keep), and for a blocking waiter its ticket's
	// lifetime ms. Replies the token, or {ms the holder has left, place in
	// the queue}.
	claimScript = engine.Register("single/claim", fast("fast_claim.lua", "lean.lua", "claim.lua"))
	// extendScript: KEYS the hash; ARGV owner, token, TTL ms, the hash's
	// lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = engine.Register("single/extend", fast("fast_extend.lua", "extend.lua"))
	// releaseScript: KEYS the hash; ARGV owner, token. Replies 1, 0 when it
	// had expired, or the error DLSTALE <attempts>.
	releaseScript = engine.Register("single/release", fast("fast_release.lua", "handoff.lua", "release.lua"))
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it (see
	// claimcore.AbandonKeep). Replies 1 when it released the lock.
	abandonScript = engine.Register("single/abandon", claimcore.Script(luaFS, "lean.lua", "handoff.lua", "abandon.lua"))
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = engine.Register("single/leave", claimcore.Script(luaFS, "handoff.lua", "leave.lua"))
	// inspectScript: KEYS the hash. Replies {owner, attempts, ms left}.
	inspectScript = engine.Register("single/inspect", fast("fast_inspect.lua", "inspect.lua"))
	// forceScript: KEYS the hash; ARGV ms the key keeps its counter.
	// Replies {old owner, old attempts, the break's token, ms the old
	// lease had left}.
	forceScript = engine.Register("single/force", claimcore.Script(luaFS, "handoff.lua", "force.lua"))

	// The same for a set of keys (AcquireAll), KEYS being the hashes.
	// claimAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, and for
	// a blocking waiter its tickets' lifetime ms. Replies the tokens, or
	// {-1, ms the longest holder has left, 1 when queued}.
	claimAllScript = engine.Register("single/claim_all", claimcore.Script(luaFS, "lean.lua", "claim_all.lua"))
	// extendAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, the
	// tokens. Replies 1, or the error DLSTALE <attempts>.
	extendAllScript = engine.Register("single/extend_all", claimcore.Script(luaFS, "lean.lua", "extend_all.lua"))
	// releaseAllScript: ARGV owner, the tokens. Replies 1, 0 when a lease
	// had expired, or the error DLSTALE <attempts>.
	releaseAllScript = engine.Register("single/release_all", claimcore.Script(luaFS, "lean.lua", "handoff.lua", "release_all.lua"))
	// abandonAllScript: ARGV owner, ms to remember it. Replies how many
	// keys it freed.
	abandonAllScript = engine.Register("single/abandon_all", claimcore.Script(luaFS, "lean.lua", "handoff.lua", "abandon_all.lua"))
	// leaveAllScript: ARGV owner. Replies how many keys it acted on.
	leaveAllScript = engine.Register("single/leave_all", claimcore.Script(luaFS, "lean.lua", "handoff.lua", "leave_all.lua"))
)

// scripts are those the core runs for this package's leases and claims.
var scripts = claimcore.Scripts{Extend: extendScript, Release: releaseScript, Abandon: abandonScript, Leave: leaveScript}

// setScripts are those the core runs for a set of keys (AcquireAll): its
// release and abandon; the set extends with a script of its own.
var setScripts = claimcore.Scripts{Release: releaseAllScript, Abandon: abandonAllScript}

// fast builds a script whose head, a fast_*.lua file, runs before the core
// prelude (claimcore.Source): it answers a lock in the lean form (see
// fast_claim.lua) without the prelude's clock, and what it does not
// answer goes on to the body, files after the prelude, as any script of
// claimcore.Script.
func fast(head string, files ...string) *node.Script {
	text, err := fs.ReadFile(luaFS, "lua/"+head)
	if err != nil {
		panic("single: " + err.Error())
	}
	return node.NewScript(string(text) + claimcore.Source(luaFS, files...))
}
