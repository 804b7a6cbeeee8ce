package claims

import (
	"embed"
	"io/fs"
	"strings"

	"github.com/dlockgo/dlock/internal/claimcore"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons. KEYS is always the queue's items hash alone; the
// queue's other keys are named by appending to it (see lua/queue.lua).
// Every lease is judged by the server's TIME, read once by the core
// prelude (claimcore.Lua) that the scripts judging one start with; no
// client clock is sent. Add, Retry and Complete judge none, and go
// without it: its TIME call and arithmetic were a sixth of their time on
// the server.
//
// luaFS holds them, read by claimcore.Script after the core prelude, or
// by clockless.
//
//go:embed lua
var luaFS embed.FS

var (
	// addScript: ARGV the ids. Replies how many were added.
	addScript = engine.Register("claims/add", clockless("queue.lua", "add.lua"))
	// claimScript: ARGV owner, TTL ms. Replies {id, token, count}, or the
	// ms until the next lease ends (-1: none; -2: the owner was abandoned).
	claimScript = engine.Register("claims/claim", claimcore.Script(luaFS, "queue.lua", "claim.lua"))
	// completeScript: ARGV id, owner, token, done record ms, token floor
	// ms (-1: for ever). Replies 1, or the error DLSTALE <token>.
	completeScript = engine.Register("claims/complete", clockless("queue.lua", "complete.lua"))
	// retryScript: ARGV id, owner, token. Replies 1, or the error DLSTALE
	// <token>.
	retryScript = engine.Register("claims/retry", clockless("queue.lua", "retry.lua"))
	// extendScript: ARGV id, owner, token, TTL ms. Replies 1, or the error
	// DLSTALE <token>.
	extendScript = engine.Register("claims/extend", claimcore.Script(luaFS, "queue.lua", "extend.lua"))
	// abandonScript: ARGV owner, ms to remember it (see claimcore.AbandonKeep).
	// Replies 1 when it returned an item to the queue.
	abandonScript = engine.Register("claims/abandon", claimcore.Script(luaFS, "queue.lua", "abandon.lua"))
	// statsScript: no ARGV. Replies {pending, claimed, expired}.
	statsScript = engine.Register("claims/stats", claimcore.Script(luaFS, "stats.lua"))
)

// clockless returns the script made of files alone, read from lua/, with
// no prelude. It panics when a file cannot be read: they are
// embedded, so that is a mistake in the build, which the first test
// finds.
func clockless(files ...string) *node.Script {
	var b strings.Builder
	for _, f := range files {
		text, err := fs.ReadFile(luaFS, "lua/"+f)
		if err != nil {
			panic("claims: " + err.Error())
		}
		b.Write(text)
	}
	return node.NewScript(b.String())
}
