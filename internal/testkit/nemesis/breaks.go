package nemesis

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

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

// earlyGrant breaks single's claim script (its swap, for a swapping Node): the lease
// judged over earlyMs before its end: a lock that grants early, the bug
// Config.EarlyGrant plants for TestNemesisCatches. Every other script
// runs as it is. It counts the calls it changed.
type earlyGrant struct {
	lines   *strings.Replacer // the lines of single's claim script to their broken forms
	scripts sync.Map          // *node.Script -> *node.Script, the broken form of each claim script met
	swapped *atomic.Int64
}

// newEarlyGrant checks single's claim script's files in the
// source tree (the test runs in it), so that a change of a line it breaks
// fails the run instead of leaving the lock unbroken.
func newEarlyGrant(swapped *atomic.Int64) (*earlyGrant, error) {
	for file, line := range map[string]string{"single/lua/claim.lua": leaseLeft, "single/lua/fast_claim.lua": leanLeaseLeft} {
		src, err := source(file)
		if err != nil {
			return nil, fmt.Errorf("early grant: %w", err)
		}
		if strings.Count(string(src), line) != 1 {
			return nil, fmt.Errorf("early grant: %s no longer has the line %q once", file, line)
		}
	}
	lines := strings.NewReplacer(leaseLeft, fmt.Sprintf(leaseLeftEarly, earlyMs),
		leanLeaseLeft, fmt.Sprintf(leanLeaseLeftEarly, earlyMs))
	return &earlyGrant{lines: lines, swapped: swapped}, nil
}

func (e *earlyGrant) swap(s *node.Script) *node.Script {
	if b, ok := e.scripts.Load(s); ok {
		e.swapped.Add(1)
		return b.(*node.Script)
	}
	src := s.Source()
	if !strings.Contains(src, leaseLeft) || !strings.Contains(src, leanLeaseLeft) || s.First() != nil {
		return s
	}
	b, _ := e.scripts.LoadOrStore(s, node.NewScript(e.lines.Replace(src)))
	e.swapped.Add(1)
	return b.(*node.Script)
}
