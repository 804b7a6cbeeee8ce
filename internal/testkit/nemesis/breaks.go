package nemesis

import (
	"fmt"
	"sync/atomic"

	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/node"
)

// earlyMs is how early a claim under Config.EarlyGrant takes a lease for
// free: in its holder's last earlyMs ms.
const earlyMs = 50

// The lines of single's claim script that judge whether the lock's lease
// is still running, in the hash (claim.lua) and in the lean form
// (fast_claim.lua, the key's PTTL), and what EarlyGrant makes of them.
const (
	leaseLeft          = "if r[1] and r[2] then left = tonumber(r[2]) - now end"
	leaseLeftEarly     = "if r[1] and r[2] then left = tonumber(r[2]) - now - %d end"
	leanLeaseLeft      = "if own then left = redis.call('PTTL', KEYS[1]) end"
	leanLeaseLeftEarly = "if own then left = redis.call('PTTL', KEYS[1]) - %d end"
)

// earlyGrant returns the swap, for a plant.Swapping Node, that breaks
// single's claim script: the lease judged over earlyMs before its end: a
// lock that grants early, the bug Config.EarlyGrant plants for
// TestNemesisCatches. Every other script runs as it is.
func earlyGrant() (func(*node.Script) *node.Script, error) {
	swap, err := plant.Replace(
		plant.Edit{File: "single/lua/claim.lua", Old: leaseLeft, New: fmt.Sprintf(leaseLeftEarly, earlyMs)},
		plant.Edit{File: "single/lua/fast_claim.lua", Old: leanLeaseLeft, New: fmt.Sprintf(leanLeaseLeftEarly, earlyMs)})
	if err != nil {
		return nil, fmt.Errorf("early grant: %w", err)
	}
	return swap, nil
}

// counted returns swap, adding one to n for each call it changes.
func counted(swap func(*node.Script) *node.Script, n *atomic.Int64) func(*node.Script) *node.Script {
	return func(s *node.Script) *node.Script {
		b := swap(s)
		if b != s {
			n.Add(1)
		}
		return b
	}
}
