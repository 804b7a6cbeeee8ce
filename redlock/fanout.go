package redlock

import (
	"context"
	"errors"
	"hash/maphash"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/node"
)

// result is one node's answer to one fanned-out request.
type result struct {
	i       int
	reply   node.Reply
	err     error
	timeout bool
	sent    bool          // the call went to the node's client: it may have run, whatever err says
	rtt     time.Duration // from the request to its answer, or to giving up

	synthetic bool // made up by next for a silent node: its real answer comes later
}

// call is one script call of a round, queued for node i's workers.
type call struct {
	r        *round
	i        int
	deadline time.Time
}

// request is the script call a round sends to each of its nodes.
type request struct {
	script *node.Script
	keys   []string
	args   []string
	// For a release: by node, whether the owner's vote there may still
	// land (see attemptState.unsure), read when the call is sent, and the
	// args sent instead of args to those nodes.
	unsure     []atomic.Bool
	unsureArgs []string
}

// argsFor returns the args of the call to node i, decided as it is sent.
func (q *request) argsFor(i int) []string {
	if q.unsure != nil && q.unsure[i].Load() {
		return q.unsureArgs
	}
	return q.args
}

// Each node is served by workersPerNode goroutines, started by New and
// ended by Close, each with a queue of its own (a lane), which take the
// calls queued in their lane and send whatever has gathered, up to
// maxBatch calls, as one pipeline: under load a round trip carries many
// calls, which costs both the client and the server far less than a round
// trip each; alone, a call goes as a plain Eval. Two lanes keep one batch
// in flight while the next one gathers. The calls of one key always take
// the same lane, so they reach each node in the order they were made: a
// Release that returned on a majority, still finishing on a slow node,
// is not overtaken there by the next acquisition of the key. (Not on a
// node whose call timed out: it may still sit in a socket while the next
// goes out on another connection.)
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
var errQueueFull = errors.New("redlock: too many calls waiting for this node")

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
	defer ctx.stop()
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

// callCtx is a worker's context for its calls, re-armed with each batch's
// deadline instead of a context.WithDeadline per call: a new context, its
// timer and its channel were a third of an acquisition's allocations.
// Clients use a call's context only while the call runs, and a worker runs
// one call at a time, so no call sees the deadline of another.
type callCtx struct {
	mu       sync.Mutex
	deadline time.Time
	armed    bool
	done     chan struct{}
	err      error
	timer    *time.Timer
}

func newCallCtx() *callCtx {
	c := &callCtx{done: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
	return c
}

func (c *callCtx) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A firing that raced with disarm, or a re-arm, is early: ignore it.
	if c.armed && c.err == nil && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
		close(c.done)
	}
}

func (c *callCtx) arm(deadline time.Time) {
	c.mu.Lock()
	if c.err != nil {
		c.done, c.err = make(chan struct{}), nil
	}
	c.deadline, c.armed = deadline, true
	c.mu.Unlock()
	c.timer.Reset(time.Until(deadline))
}

func (c *callCtx) disarm() {
	c.timer.Stop()
	c.mu.Lock()
	c.armed = false
	c.mu.Unlock()
}

func (c *callCtx) stop() { c.timer.Stop() }

// timedOut reports whether err is the call's deadline: the context's, or
// the client's own, which may come a little before it.
func (c *callCtx) timedOut(err error) bool {
	return err != nil && (c.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded))
}

func (c *callCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *callCtx) Value(any) any { return nil }

// round is one request sent to several nodes at once, through their
// workers. The caller reads answers until the outcome is decided and then
// abandons the round: an answer that comes later goes to late instead
// (which runs on a worker and must not block), so a late "yes" can still
// be looked at. Every call is counted in the Locker's WaitGroup until its
// answer is delivered, so Close waits for it.
//
// The caller does not rely on the clients to honour the deadline (go-redis
// without ContextTimeoutEnabled waits for its read timeout): past the node
// timeout, or once ctx ends, next reports the nodes still silent as timed
// out, and their real answers, when they come, go to late.
type round struct {
	req       request
	ch        chan result
	start     time.Time
	ctx       context.Context
	mu        sync.Mutex
	abandoned bool
	late      func(result)
	wg        *sync.WaitGroup

	// Used by the caller's goroutine only.
	timer   *time.Timer
	pending []int  // nodes not answered yet, as far as the caller knows
	seen    []bool // by node: already reported by next
}

// fanout sends req to the nodes at idx, each call bounded by timeout.
// The caller must hold an operation (begin).
func (lk *Locker) fanout(ctx context.Context, idx []int, timeout time.Duration, req request, late func(result)) *round {
	r := &round{req: req, ch: make(chan result, len(idx)), start: time.Now(), ctx: ctx, late: late, wg: &lk.wg,
		pending: append(make([]int, 0, len(idx)), idx...), seen: make([]bool, len(lk.nodes))}
	deadline := r.start.Add(timeout)
	r.timer = time.NewTimer(timeout + timeout/10 + time.Millisecond)
	lk.wg.Add(len(idx))
	l := lane(req.keys[0])
	for _, i := range idx {
		select {
		case lk.queues[i][l] <- call{r: r, i: i, deadline: deadline}:
		default:
			r.deliver(result{i: i, err: errQueueFull})
		}
	}
	return r
}

// deliver hands node a.i's answer to the round's reader, or to late once
// the round is abandoned.
func (r *round) deliver(a result) {
	defer r.wg.Done()
	a.rtt = time.Since(r.start)
	r.mu.Lock()
	if !r.abandoned {
		r.ch <- a // buffered for every node: never blocks
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if r.late != nil {
		r.late(a)
	}
}

// next returns the next answer; the caller must not ask for more answers
// than nodes it sent to.
func (r *round) next() result {
	for {
		var a result
		// An answer already in hand is on time: select picks at random
		// among ready cases, and would report it as silent.
		select {
		case a = <-r.ch:
		default:
			select {
			case a = <-r.ch:
			case <-r.timer.C:
				r.timer.Reset(0) // every later call reports the next silent node at once
				return r.silent(context.DeadlineExceeded, true)
			case <-r.ctx.Done():
				return r.silent(r.ctx.Err(), false)
			}
		}
		if !r.seen[a.i] {
			r.seen[a.i] = true
			for k, i := range r.pending {
				if i == a.i {
					r.pending = append(r.pending[:k], r.pending[k+1:]...)
					break
				}
			}
			return a
		}
		// Already reported as silent: a late answer.
		if r.late != nil {
			r.late(a)
		}
	}
}

// silent reports the first node still silent as failed with err.
func (r *round) silent(err error, timeout bool) result {
	i := r.pending[0]
	r.pending = r.pending[1:]
	r.seen[i] = true
	return result{i: i, err: err, timeout: timeout, rtt: time.Since(r.start), synthetic: true}
}

// abandon stops the caller's reading: answers already queued and answers
// still to come go to late.
func (r *round) abandon() {
	r.mu.Lock()
	r.abandoned = true
	r.mu.Unlock()
	r.timer.Stop()
	for {
		select {
		case a := <-r.ch:
			if r.late != nil {
				r.late(a)
			}
			continue
		default:
		}
		return
	}
}

// answerOf classifies a failed call.
func answerOf(name string, a result) NodeAnswer {
	if a.timeout {
		return NodeAnswer{Node: name, Kind: KindTimeout, Err: a.err}
	}
	return NodeAnswer{Node: name, Kind: KindError, Err: a.err}
}

// agreed reads the answer to a script that replies 1 where this owner's
// lock was found (extend, release): ok reports that 1, any other reply is
// the lock held by another, and a failed call is answerOf's.
func agreed(name string, a result) (ans NodeAnswer, ok bool) {
	switch {
	case a.err != nil:
		return answerOf(name, a), false
	case a.reply.Int(0) == 1:
		return NodeAnswer{Node: name, Kind: KindOK}, true
	}
	return NodeAnswer{Node: name, Kind: KindHeld}, false
}

// cleanupTimeout bounds each node's part in a release: a few node timeouts,
// since it runs on a context detached from the caller's.
func (lk *Locker) cleanupTimeout(ttl time.Duration) time.Duration {
	return min(4*lk.nodeTimeout(ttl), 5*time.Second)
}

// goneKeep is how long a release remembers an owner it did not find (see
// releaseScript): the longest TTL a vote of that owner could set.
func (lk *Locker) goneKeep() string {
	return strconvMs(max(lk.cfg.maxTTL, lk.cfg.ttl))
}

// keep returns how long, in ms, a fence counter is kept after a commit or
// extension for ttl: ttl plus the idle TTL, or "0" to keep it for ever.
func (lk *Locker) keep(ttl time.Duration) string {
	if lk.cfg.idle < 0 {
		return "0"
	}
	return strconvMs(ttl + lk.cfg.idle)
}

// releasing is what a release of one owner's votes sends.
type releasing struct {
	owner   string
	unsure  []atomic.Bool // by node, where the owner's vote may still land (see attemptState); nil: nowhere
	waiter  string        // the Acquire the lease was granted to, whose ticket goes; empty for none
	token   string        // the lease's token: its release is idempotent; empty for a failed attempt's
	ttl     time.Duration // the lease's TTL, which bounds the release's calls
	publish bool          // wake the next waiter
}

// releaseAll runs the release script for rel on the nodes at idx (all
// when nil), detached from ctx's cancellation and bounded by
// cleanupTimeout per node, recording the owner as gone where it does not
// hold the lock and its vote may still land. It returns once need nodes released the lock, or every
// node for which await is true (all when await is nil) answered; the
// other calls finish in the background, counted in the Locker's
// WaitGroup, which Close waits for. Nodes not awaited are reported as
// KindNotAwaited.
func (lk *Locker) releaseAll(ctx context.Context, ks *keySet, rel releasing, idx []int, need int, await []bool) (answers []NodeAnswer, released int) {
	ch := ""
	if rel.publish {
		ch = ks.channel
	}
	if idx == nil {
		idx = lk.all()
	}
	answers = make([]NodeAnswer, len(lk.nodes))
	for i := range answers {
		answers[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
	}
	if len(idx) == 0 {
		return answers, 0
	}
	req := request{script: releaseScript, keys: ks.release[:],
		args: []string{rel.owner, ch, "0", rel.waiter, rel.token}}
	if rel.unsure != nil {
		req.unsure = rel.unsure
		req.unsureArgs = []string{rel.owner, ch, lk.goneKeep(), rel.waiter, rel.token}
	}
	r := lk.fanout(context.WithoutCancel(ctx), idx, lk.cleanupTimeout(rel.ttl), req, nil)
	waiting := 0
	for _, i := range idx {
		if await == nil || await[i] {
			waiting++
		}
	}
	for got := 0; got < len(idx) && waiting > 0 && released < need; got++ {
		a := r.next()
		if await == nil || await[a.i] {
			waiting--
		}
		var ok bool
		if answers[a.i], ok = agreed(lk.names[a.i], a); ok {
			released++
		}
	}
	r.abandon()
	return answers, released
}

// releaseOne undoes a late grant on node i, on a context of its own: the
// vote has run, and there is no late one to refuse.
func (lk *Locker) releaseOne(i int, ks *keySet, owner string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), lk.cleanupTimeout(ttl))
	defer cancel()
	lk.busy[i].Add(1)
	defer lk.busy[i].Add(-1)
	_, _ = lk.nodes[i].Eval(ctx, releaseScript, ks.release[:], owner, "", "0", "", "")
}

// all returns every node's index, in a slice the caller must not change.
func (lk *Locker) all() []int { return lk.every }

func strconvMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
