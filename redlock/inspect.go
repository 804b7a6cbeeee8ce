package redlock

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
	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/node"
)

// Info is the state of one lock across the nodes, at about one instant.
type Info struct {
	Key string
	// Held reports whether one owner holds the lock on a majority of the
	// nodes that answered: the lock is taken.
	Held bool
	// Owner is that majority owner; empty when not Held. Whoever knows it
	// can release the lock: show it shortened.
	Owner string
	// Token is the highest fence counter among the nodes holding the lock
	// for Owner: the holder's token when it was acquired with tokens.
	// When not Held, it is the highest counter any node answered with.
	Token fence.Token
	// TTL is how long a majority still holds the lock for Owner, by the
	// nodes' own expiry; 0 when not Held.
	TTL time.Duration
	// Quorum is the number of nodes a lock needs: N/2+1.
	Quorum int
	// Nodes holds each node's answer, in the order the Locker was given
	// its nodes.
	Nodes []NodeInfo
}

// NodeInfo is one node's view of a lock.
type NodeInfo struct {
	Node    string        // the node's name (its address)
	Owner   string        // the owner there; empty when free there
	TTL     time.Duration // time the lock has left there; 0 when free
	Counter fence.Token   // the node's effective fence counter for the key: max(counter, floor)
	Err     error         // set when the node did not answer in time
}

// inspectScript reads the lock (KEYS[1]), the fence counter (KEYS[2]) and
// the node's floor (KEYS[3]) and writes nothing. Reply: {owner (empty
// when none), pttl, counter, floor}. The effective counter, the one the
// next commit on this node must exceed, is the larger of the two: a node
// repaired after losing its data holds its lower bound in the floor.
var inspectScript = node.NewScript(`
local o = redis.call('GET', KEYS[1])
local p = redis.call('PTTL', KEYS[1])
return {o or '', p, redis.call('GET', KEYS[2]) or '0', redis.call('GET', KEYS[3]) or '0'}
`)

// Inspect reports who holds the lock on key on each node, with its fence
// counter and time left there, and what a majority agrees on. Each node is
// asked in parallel within the node timeout; a node that fails is reported
// in its NodeInfo, not as an error. Inspect changes nothing on the nodes.
func (lk *Locker) Inspect(ctx context.Context, key string) (Info, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return Info{}, err
	}
	if err := acquire.CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := lk.begin(); err != nil {
		return Info{}, err
	}
	defer lk.wg.Done()
	ks := newKeySet(key)
	keys := []string{ks.script[0], ks.script[5], floorKey}
	info := Info{Key: key, Quorum: lk.Quorum(), Nodes: make([]NodeInfo, len(lk.nodes))}
	var wg sync.WaitGroup
	for i, n := range lk.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, lk.nodeTimeout(lk.cfg.ttl))
			defer cancel()
			info.Nodes[i] = inspectNode(nctx, n, lk.names[i], keys)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("redlock: inspect %q: %w", key, err)
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

func inspectNode(ctx context.Context, n node.Node, name string, keys []string) NodeInfo {
	ni := NodeInfo{Node: name}
	r, err := n.Eval(ctx, inspectScript, keys)
	if err != nil {
		ni.Err = err
		return ni
	}
	c, err1 := strconv.ParseUint(r.Str(2), 10, 64)
	f, err2 := strconv.ParseUint(r.Str(3), 10, 64)
	if err1 != nil || err2 != nil {
		// Counters are tokens: the error names none.
		ni.Err = errors.New("redlock: fence counter or floor is not an unsigned integer")
		return ni
	}
	ni.Counter = fence.Token(max(c, f))
	if r.Str(0) != "" && r.Int(1) > 0 {
		ni.Owner = r.Str(0)
		ni.TTL = time.Duration(r.Int(1)) * time.Millisecond
	}
	return ni
}
