package permits

import (
	_ "embed"
	"time"

	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons, each after lua/state.lua, which reads the server's
// clock once (TIME) and judges every permit by it.
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
)

var (
	// claimScript: KEYS the name's hash; ARGV owner, N, TTL ms, the hash's
	// lifetime ms, and for a blocking waiter its ticket's lifetime ms.
	// Replies {token, slot}, or {ms until a permit ends, place, 0}.
	claimScript = node.NewScript(stateLua + claimLua)
	// extendScript: KEYS the hash; ARGV owner, token, slot, TTL ms, the
	// hash's lifetime ms. Replies 1, or the error DLSTALE <token>.
	extendScript = node.NewScript(stateLua + extendLua)
	// releaseScript: KEYS the hash; ARGV owner, token, slot. Replies 1, 0
	// when it had ended, or the error DLSTALE <token>.
	releaseScript = node.NewScript(stateLua + releaseLua)
	// leaveScript: KEYS the hash; ARGV owner. Replies 1 when it gave
	// something up.
	leaveScript = node.NewScript(stateLua + leaveLua)
	// abandonScript: KEYS the hash; ARGV owner, ms to remember it. Replies
	// 1 when it released a permit.
	abandonScript = node.NewScript(stateLua + abandonLua)
)

// abandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that, held up in a network path or behind a paused server,
// holds a permit for its TTL under an owner nobody uses. That costs the
// name one permit for one TTL, never a permit over N.
const abandonKeep = 10 * time.Second
