package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/plant"
	"github.com/dlockgo/dlock/node"
)

// The bugs Config.Plant can plant, for TestNemesisCatches and the
// -nemesis.plant flag: each must make the nemesis find its property
// broken.
const (
	// PlantRateOneYes: a rate limit that admits on one node's yes (see
	// oneYes): RATE.
	PlantRateOneYes = "rate-one-yes"
	// PlantTrustingResume: a resume that takes the handle's word for its
	// token (see trusting): HANDLE.
	PlantTrustingResume = "trusting-resume"
	// PlantEarlyGrant: a lock granted early, as Config.EarlyGrant: ME.
	PlantEarlyGrant = "early-grant"
	// PlantRateStingy: rate limits that admit a quarter of the rate the
	// checks hold them to, as a limit that loses its refunds would:
	// RATE floor.
	PlantRateStingy = "rate-stingy"
	// PlantSQLUnfenced: the PostgreSQL register's writes without the
	// helper's token condition, a plain upsert (see sqlRegister): FENCE,
	// found in the table's own log.
	PlantSQLUnfenced = "sql-unfenced"
)

// Plants lists the plants Config.Plant takes.
var Plants = []string{PlantRateOneYes, PlantTrustingResume, PlantEarlyGrant, PlantRateStingy, PlantSQLUnfenced}

// The first lines of the scripts the plants recognize, checked against
// the source tree when a plant is built, so that a change of them fails
// the run instead of leaving the library unbroken.
var (
	gcraHead          = scriptHead{"ratelimit/lua/gcra.lua", "-- gcra: one call on one rate limit"}
	singleInspectHead = scriptHead{"single/lua/inspect.lua", "-- inspect: who holds the lock, with which token"}
	quorumInspectHead = scriptHead{"quorum/lua/inspect.lua", "-- inspect: one node's view of a lock"}
)

type scriptHead struct{ file, line string }

func (h scriptHead) check() error {
	src, err := plant.Source(h.file)
	if err != nil {
		return fmt.Errorf("plant: %w", err)
	}
	if !strings.HasPrefix(string(src), h.line) {
		return fmt.Errorf("plant: %s no longer starts with %q", h.file, h.line)
	}
	return nil
}

func (h scriptHead) of(s *node.Script) bool { return strings.Contains(s.Source(), h.line) }

// renamed is a view of a node in which the rate limit's key is another
// one (KEY:suffix): a second limit on the same server, for the single
// strategy's rate-one-yes plant, whose one node has no other to ask.
type renamed struct {
	node.Node
	suffix string
}

func (r *renamed) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if gcraHead.of(s) && len(keys) > 0 {
		keys = append([]string{keys[0] + r.suffix}, keys[1:]...)
	}
	return r.Node.Eval(ctx, s, keys, args...)
}

// oneYesViews returns the nodes a rate-one-yes caller sends its calls to,
// one Limiter on each, in turn: each call is decided by one node's yes,
// as if that node were a majority. The quorum's nodes are its own; the
// single server is itself and a renamed view of itself, so that its limit
// admits what two would.
func oneYesViews(nodes []node.Node) ([]node.Node, error) {
	if err := gcraHead.check(); err != nil {
		return nil, err
	}
	if len(nodes) == 1 {
		return []node.Node{nodes[0], &renamed{Node: nodes[0], suffix: ":2"}}, nil
	}
	return nodes, nil
}

// trust is the trusting-resume plant's word: the token a forged handle
// claims, by the lease owner it names, while the harness resumes it.
type trust struct{ m sync.Map }

func (t *trust) set(owner string, tok fence.Token) { t.m.Store(owner, tok) }
func (t *trust) clear(owner string)                { t.m.Delete(owner) }

func (t *trust) token(owner string) (fence.Token, bool) {
	v, ok := t.m.Load(owner)
	if !ok {
		return 0, false
	}
	return v.(fence.Token), true
}

// trusting is a node of a broken resume: when the inspect script (the
// servers' answer to "which token does this lock hold") names an owner
// the harness is resuming a forged handle of, it answers with the
// handle's token instead of the server's, as a resume that trusted the
// handle would. Every other script, and every other owner, runs as it is.
type trusting struct {
	node.Node
	t *trust
}

func (n *trusting) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	r, err := n.Node.Eval(ctx, s, keys, args...)
	if err != nil {
		return r, err
	}
	at := -1
	switch {
	case singleInspectHead.of(s):
		at = 1 // {owner, attempts, ms left}
	case quorumInspectHead.of(s):
		at = 2 // {owner, pttl, counter, floor, …}
	}
	if at < 0 || len(r) <= at {
		return r, err
	}
	tok, ok := n.t.token(r.Str(0))
	if !ok {
		return r, err
	}
	r = append(node.Reply(nil), r...)
	r[at] = node.Value{Kind: node.Str, Str: strconv.FormatUint(uint64(tok), 10)}
	return r, nil
}

// trustingNodes wraps a Locker's nodes as trusting, all answering by t.
func trustingNodes(nodes []node.Node, t *trust) ([]node.Node, error) {
	for _, h := range []scriptHead{singleInspectHead, quorumInspectHead} {
		if err := h.check(); err != nil {
			return nil, err
		}
	}
	out := make([]node.Node, len(nodes))
	for i, n := range nodes {
		out[i] = &trusting{Node: n, t: t}
	}
	return out, nil
}
