package claims

import (
	_ "embed"
	"time"

	"github.com/dlockgo/dlock/node"
)

// The scripts, one per transition, each in lua/ with its keys, arguments,
// replies and reasons. KEYS is always the queue's items hash alone; the
// queue's other keys are named by appending to it (see lua/queue.lua).
// Every lease is judged by the server's TIME; no client clock is sent.
var (
	//go:embed lua/queue.lua
	queueLua string
	//go:embed lua/add.lua
	addLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/complete.lua
	completeLua string
	//go:embed lua/retry.lua
	retryLua string
	//go:embed lua/extend.lua
	extendLua string
	//go:embed lua/abandon.lua
	abandonLua string
	//go:embed lua/stats.lua
	statsLua string
)

var (
	// addScript: ARGV the ids. Replies how many were added.
	addScript = node.NewScript(queueLua + addLua)
	// claimScript: ARGV owner, TTL ms. Replies {id, token, count}, or the
	// ms until the next lease ends (-1: none; -2: the owner was abandoned).
	claimScript = node.NewScript(queueLua + claimLua)
	// completeScript: ARGV id, owner, token, done record ms, token floor
	// ms (-1: for ever). Replies 1, or the error DLSTALE <token>.
	completeScript = node.NewScript(queueLua + completeLua)
	// retryScript: ARGV id, owner, token. Replies 1, or the error DLSTALE
	// <token>.
	retryScript = node.NewScript(queueLua + retryLua)
	// extendScript: ARGV id, owner, token, TTL ms. Replies 1, or the error
	// DLSTALE <token>.
	extendScript = node.NewScript(queueLua + extendLua)
	// abandonScript: ARGV owner, ms to remember it (see abandonKeep).
	// Replies 1 when it returned an item to the queue.
	abandonScript = node.NewScript(queueLua + abandonLua)
	// statsScript: no ARGV. Replies {pending, claimed, expired}.
	statsScript = node.NewScript(statsLua)
)

// abandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that after its abandon holds an item for one TTL under an
// owner nobody uses, after which the next claim returns it to the queue.
// That delays the item by one TTL; it is never lost or handed out twice.
const abandonKeep = 10 * time.Second
