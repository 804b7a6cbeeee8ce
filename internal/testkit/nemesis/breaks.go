package nemesis

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dlockgo/dlock/node"
)

// earlyMs is how early a claim under Config.EarlyGrant takes a lease for
// free: in its holder's last earlyMs ms.
const earlyMs = 50

// The line of single's claim script that judges whether the lock's lease
// is still running, and what EarlyGrant makes of it.
const (
	leaseLeft      = "if r[1] and r[2] then left = tonumber(r[2]) - now end"
	leaseLeftEarly = "if r[1] and r[2] then left = tonumber(r[2]) - now - %d end"
)

// earlyGrant is a Node that runs single's claim script with the lease
// judged over earlyMs before its end: a lock that grants early, the bug
// Config.EarlyGrant plants for TestNemesisCatches. Every other script
// runs as it is. It counts the calls it changed.
type earlyGrant struct {
	node.Node
	claim, broken string   // single's claim script's source (without its preamble), and its broken form
	scripts       sync.Map // *node.Script -> *node.Script, the broken form of each claim script met
	swapped       *atomic.Int64
}

// newEarlyGrant wraps n, reading single's claim script from the source
// tree (the test runs in it), so that a change of the line it breaks
// fails the run instead of leaving the lock unbroken.
func newEarlyGrant(n node.Node, swapped *atomic.Int64) (*earlyGrant, error) {
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "..", "single", "lua", "claim.lua")
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("early grant: %w", err)
	}
	claim := string(src)
	if strings.Count(claim, leaseLeft) != 1 {
		return nil, fmt.Errorf("early grant: %s no longer has the line %q once", path, leaseLeft)
	}
	broken := strings.Replace(claim, leaseLeft, fmt.Sprintf(leaseLeftEarly, earlyMs), 1)
	return &earlyGrant{Node: n, claim: claim, broken: broken, swapped: swapped}, nil
}

func (e *earlyGrant) swap(s *node.Script) *node.Script {
	if b, ok := e.scripts.Load(s); ok {
		e.swapped.Add(1)
		return b.(*node.Script)
	}
	src := s.Source()
	if !strings.HasSuffix(src, e.claim) || s.First() != nil {
		return s
	}
	b, _ := e.scripts.LoadOrStore(s, node.NewScript(strings.TrimSuffix(src, e.claim)+e.broken))
	e.swapped.Add(1)
	return b.(*node.Script)
}

func (e *earlyGrant) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	return e.Node.Eval(ctx, e.swap(s), keys, args...)
}

func (e *earlyGrant) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	changed := make([]node.Call, len(calls))
	for i, c := range calls {
		c.Script = e.swap(c.Script)
		changed[i] = c
	}
	return e.Node.Pipeline(ctx, changed, wait)
}
