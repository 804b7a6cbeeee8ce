package quorum

import (
	"context"
	"errors"
	"hash/maphash"
	"time"

	"github.com/dlockgo/dlock/node"
)

// Each node is served by workersPerNode goroutines, started by New and
// ended by Close, each with a queue of its own (a lane), which take the
// calls queued in their lane and send whatever has gathered, up to
// maxBatch calls, as one pipeline: under load a round trip carries many
// calls, which costs both the client and the server far less than a round
// trip each; alone, a call goes as a plain Eval. Two lanes keep one batch
// in flight while the next one gathers. The gathering is done here, not
// left to the node adapters' own (go-redis's batcher, valkey-go's
// pipelining), because a round's calls to a node are already queued
// here: leaving it to the adapter takes a goroutine per call waiting in
// its queue, and with 32 one-call workers per node instead of these two,
// 64 callers' lock+unlock ran at half the rate, at twice the client and
// server CPU per call. A Pipeline does not pass through the adapter's
// batcher: each call meets one of the two. The calls of one key always take
// the same lane, so they reach each node in the order they were made: a
// Release that returned on a majority, still finishing on a slow node,
// is not overtaken there by the next acquisition of the key. (Not on a
// node whose call timed out: it may still sit in a socket while the next
// goes out on another connection; nor on a node that lost its script
// cache, see node.Node's Pipeline. Both cost at most a refused vote or a
// vote undone: order is for liveness, never relied on for safety.)
const (
	workersPerNode = 2
	maxBatch       = 64
	queueLen       = 1024 // calls waiting per lane before new ones fail at once
)

// laneSeed seeds the hash that picks a key's lane.
var laneSeed = maphash.MakeSeed()

// lane returns the lane of the calls on key's lock.
func lane(key string) int { return int(maphash.String(laneSeed, key) % workersPerNode) }

// errQueueFull is a node's answer when its queue is full: the node has not
// kept up for a while (hung, or far slower than the others).
var errQueueFull = errors.New("quorum: too many calls waiting for this node")

func (lk *Locker) startWorkers() {
	lk.queues = make([][workersPerNode]chan call, len(lk.nodes))
	for i := range lk.nodes {
		for l := range workersPerNode {
			lk.queues[i][l] = make(chan call, queueLen)
			lk.workers.Add(1)
			go lk.serve(i, lk.queues[i][l])
		}
	}
}

// stopWorkers ends the workers once every call was answered: the caller
// has waited for lk.wg, which counts the calls in flight.
func (lk *Locker) stopWorkers() {
	lk.stopOnce.Do(func() {
		for _, lanes := range lk.queues {
			for _, q := range lanes {
				close(q)
			}
		}
	})
	lk.workers.Wait()
}

// serve sends node i's calls, in batches, until q is closed.
func (lk *Locker) serve(i int, q <-chan call) {
	defer lk.workers.Done()
	ctx := newCallCtx()
	defer func() { ctx.stop() }()
	batch := make([]call, 0, maxBatch)
	calls := make([]node.Call, 0, maxBatch)
	for c := range q {
		batch = append(batch[:0], c)
	gather:
		for len(batch) < maxBatch {
			select {
			case c, ok := <-q:
				if !ok {
					break gather
				}
				batch = append(batch, c)
			default:
				break gather
			}
		}
		lk.send(i, ctx, batch, calls[:0])
		if ctx.spent() {
			ctx.stop()
			ctx = newCallCtx()
		}
	}
}

// send runs one batch on node i and delivers each call's answer. A call
// whose deadline has passed or whose caller has gone is not sent: a vote
// nobody waits for any more would only have to be undone.
func (lk *Locker) send(i int, ctx *callCtx, batch []call, calls []node.Call) {
	now := time.Now()
	live := batch[:0]
	var deadline time.Time
	for _, c := range batch {
		if err := c.r.ctx.Err(); err != nil {
			c.r.deliver(result{i: i, err: err})
			continue
		}
		if !now.Before(c.deadline) {
			c.r.deliver(result{i: i, err: context.DeadlineExceeded, timeout: true})
			continue
		}
		deadline = later(deadline, c.deadline)
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	nd := lk.nodes[i]
	lk.busy[i].Add(1)
	defer lk.busy[i].Add(-1)
	ctx.arm(deadline)
	if len(live) == 1 {
		c := live[0]
		q := &c.r.req
		reply, err := nd.Eval(ctx, q.script, q.keys, q.argsFor(i)...)
		timeout := ctx.timedOut(err)
		ctx.disarm()
		c.r.deliver(result{i: i, reply: reply, err: err, timeout: timeout, sent: true})
		return
	}
	for _, c := range live {
		q := &c.r.req
		calls = append(calls, node.Call{Script: q.script, Keys: q.keys, Args: q.argsFor(i)})
	}
	res, _, err := nd.Pipeline(ctx, calls, node.Wait{})
	timeout := ctx.timedOut(err)
	ctx.disarm()
	for k, c := range live {
		a := result{i: i, err: err, timeout: timeout, sent: true}
		if err == nil {
			a.reply, a.err = res[k].Reply, res[k].Err
		}
		c.r.deliver(a)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
