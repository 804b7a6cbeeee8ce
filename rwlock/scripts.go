package rwlock

import (
	_ "embed"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/rwhook"
	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua, which reads the server's
// clock once (TIME) and judges every lease and ticket by it.
var (
	//go:embed lua/state.lua
	stateLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/inspect.lua
	inspectLua string
)

var (
	// claimScript: KEYS the lock's hash; ARGV owner, kind ("w" or "r"),
	// TTL ms, the hash's lifetime ms, and for a blocking waiter its
	// ticket's lifetime ms. Replies the token, or {ms until the lease in
	// the way may end, place in the queue}.
	claimScript = node.NewScript(stateLua + claimLua)
	// claimUnraisedScript is claimScript under the rule before readers
	// raised the counter: for internal/rwhook only (see unraised).
	claimUnraisedScript = node.NewScript(stateLua + unraised(claimLua))
	// extendScript: KEYS the hash; ARGV owner, kind, token, TTL ms, the
	// hash's lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = node.NewScript(stateLua + extendLua)
	// releaseScript: KEYS the hash; ARGV owner, kind, token. Replies 1, 0
	// when the lease had ended, or the error DLSTALE <attempts>.
	releaseScript = node.NewScript(stateLua + releaseLua)
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = node.NewScript(stateLua + leaveLua)
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it. Replies
	// 1 when it gave up a lease.
	abandonScript = node.NewScript(stateLua + abandonLua)
	// inspectScript: KEYS the hash. Replies {attempts, writer, its ms
	// left, live readers, the last reader, its ms left}.
	inspectScript = node.NewScript(stateLua + inspectLua)
)

// abandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that, held up in a network path or behind a paused server,
// holds the lock for its TTL under an owner nobody uses. That costs the
// key one TTL of availability (for a reader's claim, of the writers'),
// never a second holder.
const abandonKeep = 10 * time.Second

// unraised returns the claim script with its raise switched off: readers
// share the counter as a writer left it, the rule this package had before,
// under which a writer paused past its lease carries the readers' token.
// It exists so that the checkers that must find that gap can be shown to.
func unraised(claim string) string {
	const on, off = "local raise = true\n", "local raise = false\n"
	if strings.Count(claim, on) != 1 {
		panic("rwlock: claim.lua has no single " + strings.TrimSpace(on))
	}
	return strings.Replace(claim, on, off, 1)
}

func init() {
	rwhook.UnraiseReaders = func(locker any) { locker.(*Locker).unraised.Store(true) }
}
