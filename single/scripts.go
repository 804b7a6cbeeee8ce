package single

import (
	_ "embed"
	"time"

	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons. Every one reads the server's clock once (TIME) and
// judges every lease by it; none compares a client's clock with it.
var (
	//go:embed lua/keep.lua
	keepLua string
	//go:embed lua/handoff.lua
	handoffLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/leave.lua
	leaveLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/claim_all.lua
	claimAllLua string
	//go:embed lua/extend_all.lua
	extendAllLua string
	//go:embed lua/release_all.lua
	releaseAllLua string
	//go:embed lua/abandon_all.lua
	abandonAllLua string
	//go:embed lua/leave_all.lua
	leaveAllLua string
)

var (
	// claimScript: KEYS the lock's hash; ARGV owner, TTL ms, the hash's
	// lifetime ms (see Locker.keep), and for a blocking waiter its ticket's
	// lifetime ms. Replies the token, or {ms the holder has left, place in
	// the queue}.
	claimScript = node.NewScript(keepLua + claimLua)
	// extendScript: KEYS the hash; ARGV owner, token, TTL ms, the hash's
	// lifetime ms. Replies 1, or the error DLSTALE <attempts>.
	extendScript = node.NewScript(keepLua + extendLua)
	// releaseScript: KEYS the hash; ARGV owner, token. Replies 1, 0 when it
	// had expired, or the error DLSTALE <attempts>.
	releaseScript = node.NewScript(keepLua + handoffLua + releaseLua)
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it (see
	// abandonKeep). Replies 1 when it released the lock.
	abandonScript = node.NewScript(keepLua + handoffLua + abandonLua)
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when there was a
	// ticket.
	leaveScript = node.NewScript(keepLua + handoffLua + leaveLua)
	// inspectScript: KEYS the hash. Replies {owner, attempts, ms left}.
	inspectScript = node.NewScript(inspectLua)

	// The same for a set of keys (AcquireAll), KEYS being the hashes.
	// claimAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, and for
	// a blocking waiter its tickets' lifetime ms. Replies the tokens, or
	// {-1, ms the longest holder has left, 1 when queued}.
	claimAllScript = node.NewScript(keepLua + claimAllLua)
	// extendAllScript: ARGV owner, TTL ms, the hashes' lifetime ms, the
	// tokens. Replies 1, or the error DLSTALE <attempts>.
	extendAllScript = node.NewScript(keepLua + extendAllLua)
	// releaseAllScript: ARGV owner, the tokens. Replies 1, 0 when a lease
	// had expired, or the error DLSTALE <attempts>.
	releaseAllScript = node.NewScript(keepLua + handoffLua + releaseAllLua)
	// abandonAllScript: ARGV owner, ms to remember it. Replies how many
	// keys it freed.
	abandonAllScript = node.NewScript(keepLua + handoffLua + abandonAllLua)
	// leaveAllScript: ARGV owner. Replies how many keys it acted on.
	leaveAllScript = node.NewScript(keepLua + handoffLua + leaveAllLua)
)

// abandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that after its abandon, held up in a network path or behind a
// paused server, holds the lock for its TTL under an owner nobody uses. That
// costs the key one TTL of availability, never a second holder. A claim and
// its abandon held up in one paused server both run within moments of its
// resuming.
const abandonKeep = 10 * time.Second
