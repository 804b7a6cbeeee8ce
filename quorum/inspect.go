package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// inspectScript: KEYS lock, fence counter, floor, epoch record, repair
// mark. Replies {owner, pttl, counter, floor, now µs, stamp µs, repaired}
// (lua/inspect.lua).
var inspectScript = lua.Script(lua.Spec{Name: "quorum/inspect", FS: luaFS, Lib: lib, Body: []string{"inspect.lua"}})

// Inspect reports who holds the lock on key on each node, with its fence
// counter, metadata and time left there, whether the node sits out, and
// what a majority agrees on. Each node is asked in parallel within the
// node timeout; a node that fails is reported in its NodeInfo, not as an
// error. Info.Held is false also when too few nodes answered to tell: a
// caller that must tell "free" from "unknown" counts, as dlock inspect
// and election do, whether an owner seen on some nodes, with the nodes
// that failed, could make a majority. Inspect changes nothing on the
// nodes.
func (lk *Locker) Inspect(ctx context.Context, key string) (lease.Info, error) {
	if err := engine.CheckCall(ctx, key); err != nil {
		return lease.Info{}, err
	}
	if err := lk.begin(); err != nil {
		return lease.Info{}, err
	}
	defer lk.wg.Done()
	info := lease.Info{Key: key, Quorum: lk.Quorum()}
	var err error
	if info.Nodes, _, err = lk.look(ctx, key); err != nil {
		return lease.Info{}, err
	}

	votes := make(map[string]int)
	for _, ni := range info.Nodes {
		if ni.Owner != "" {
			votes[ni.Owner]++
		}
		info.Token = max(info.Token, ni.Counter)
	}
	for owner, n := range votes {
		if n >= info.Quorum {
			info.Held, info.Owner = true, owner
			info.Metadata = engine.Metadata(owner)
		}
	}
	if !info.Held {
		return info, nil
	}
	var ttls []time.Duration
	info.Token = 0
	for _, ni := range info.Nodes {
		if ni.Owner == info.Owner {
			ttls = append(ttls, ni.TTL)
			info.Token = max(info.Token, ni.Counter)
		}
	}
	// The lock stays taken until fewer than a quorum still hold it: the
	// quorum-th longest time left.
	slices.SortFunc(ttls, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	info.TTL = ttls[info.Quorum-1]
	return info, nil
}

// look asks every node, in parallel and each within the node timeout, for
// its view of the lock on key (lua/inspect.lua). It returns each node's
// NodeInfo and, by node, the key's own fence counter there: the value
// commits set, where NodeInfo.Counter is the effective counter, raised to
// the node's floor. The caller holds an operation (begin).
func (lk *Locker) look(ctx context.Context, key string) ([]lease.NodeInfo, []fence.Token, error) {
	ks := newKeySet(key)
	keys := []string{ks.script[0], ks.script[5], floorKey, epochKey, repairedKey}
	nodes := make([]lease.NodeInfo, len(lk.nodes))
	own := make([]fence.Token, len(lk.nodes))
	var wg sync.WaitGroup
	for i, n := range lk.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, lk.nodeTimeout(lk.cfg.TTL))
			defer cancel()
			nodes[i] = lk.inspectNode(nctx, n, lk.names[i], keys, &own[i])
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("quorum: inspect %q: %w", key, err)
	}
	return nodes, own, nil
}

// inspectNode returns node n's view of a lock (see look), and sets *own
// to the key's own fence counter there.
func (lk *Locker) inspectNode(ctx context.Context, n node.Node, name string, keys []string, own *fence.Token) lease.NodeInfo {
	ni := lease.NodeInfo{Node: name}
	r, err := n.Eval(ctx, inspectScript, keys)
	if err != nil {
		ni.Err = err
		return ni
	}
	c, err1 := strconv.ParseUint(r.Str(2), 10, 64)
	f, err2 := strconv.ParseUint(r.Str(3), 10, 64)
	if len(r) != 7 || err1 != nil || err2 != nil {
		// Counters are tokens: the error names none.
		ni.Err = fmt.Errorf("quorum: unexpected inspect reply: %d values, want 7, with integer counters", len(r))
		return ni
	}
	ni.Counter = fence.Token(max(c, f))
	*own = fence.Token(c)
	if r.Str(0) != "" && r.Int(1) > 0 {
		ni.Owner = r.Str(0)
		ni.Metadata = engine.Metadata(ni.Owner)
		ni.TTL = time.Duration(r.Int(1)) * time.Millisecond
	}
	if lk.cfg.Durable {
		return ni
	}
	now, stamp := r.Int(4), r.Int(5)
	if stamp < 0 {
		ni.Err = errors.New("quorum: the node refuses INFO to scripts, so the lost-data guard cannot tell whether it restarted")
		return ni
	}
	if stamp > 0 {
		ni.SinceLoss = time.Duration(now-stamp) * time.Microsecond
	}
	if left := lk.sitOut - time.Duration(now-stamp)*time.Microsecond; left > 0 {
		ni.SitsOut = left
	} else {
		ni.Unrepaired = lk.cfg.Tokens && r.Int(6) == 0
	}
	return ni
}
