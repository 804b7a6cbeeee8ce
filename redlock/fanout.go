package redlock

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/dlockgo/dlock/node"
)

// result is one node's answer to one fanned-out request.
type result struct {
	i       int
	res     []node.Result
	err     error
	timeout bool
	rtt     time.Duration // from the request to its answer, or to giving up
}

// round is one request sent to several nodes at once, one goroutine per
// node. The caller reads answers until the outcome is decided and then
// abandons the round: a goroutine whose node answers later hands its answer
// to late instead, so a late "yes" can still be undone. Every goroutine
// ends within the node timeout plus whatever late does, and is counted in
// the Locker's WaitGroup, so Close waits for it.
//
// The caller does not rely on the clients to honour the context's deadline
// (go-redis without ContextTimeoutEnabled waits for its read timeout):
// past the node timeout, or once ctx ends, next reports the nodes still
// silent as timed out, and their real answers, when they come, go to late.
type round struct {
	ch        chan result
	start     time.Time
	mu        sync.Mutex
	abandoned bool
	late      func(result)
	wg        *sync.WaitGroup

	// Used by the caller's goroutine only.
	ctx     context.Context
	timer   *time.Timer
	pending []int        // nodes not answered yet, as far as the caller knows
	seen    map[int]bool // nodes already reported by next
}

// fanout sends do to the nodes at idx, each bounded by timeout on a context
// derived from ctx. The caller must hold an operation (begin).
func (lk *Locker) fanout(ctx context.Context, idx []int, timeout time.Duration,
	do func(ctx context.Context, i int) ([]node.Result, error), late func(result)) *round {
	r := &round{ch: make(chan result, len(idx)), start: time.Now(), late: late, wg: &lk.wg, ctx: ctx,
		timer:   time.NewTimer(timeout + timeout/10 + time.Millisecond),
		pending: slices.Clone(idx), seen: make(map[int]bool, len(idx))}
	lk.wg.Add(len(idx))
	for _, i := range idx {
		go func() {
			defer lk.wg.Done()
			nctx, cancel := context.WithTimeout(ctx, timeout)
			res, err := do(nctx, i)
			// Clients may give up a little before the context's deadline,
			// reporting it themselves.
			timedOut := err != nil && ctx.Err() == nil && (errors.Is(nctx.Err(), context.DeadlineExceeded) ||
				errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded))
			cancel()
			a := result{i: i, res: res, err: err, timeout: timedOut, rtt: time.Since(r.start)}
			r.mu.Lock()
			if r.abandoned {
				r.mu.Unlock()
				if r.late != nil {
					r.late(a)
				}
				return
			}
			r.ch <- a // buffered for every node: never blocks
			r.mu.Unlock()
		}()
	}
	return r
}

// next returns the next answer; the caller must not ask for more answers
// than nodes it sent to.
func (r *round) next() result {
	for {
		var a result
		select {
		case a = <-r.ch:
		case <-r.timer.C:
			r.timer.Reset(0) // every later call reports the next silent node at once
			return r.silent(context.DeadlineExceeded, true)
		case <-r.ctx.Done():
			return r.silent(r.ctx.Err(), false)
		}
		if !r.seen[a.i] {
			r.seen[a.i] = true
			r.pending = slices.DeleteFunc(r.pending, func(i int) bool { return i == a.i })
			return a
		}
		// Already reported as silent: a late answer.
		if r.late != nil {
			r.wg.Go(func() { r.late(a) })
		}
	}
}

// silent reports the first node still silent as failed with err.
func (r *round) silent(err error, timeout bool) result {
	i := r.pending[0]
	r.pending = r.pending[1:]
	r.seen[i] = true
	return result{i: i, err: err, timeout: timeout, rtt: time.Since(r.start)}
}

// abandon stops the caller's reading: answers already queued and answers
// still to come go to late, which runs on goroutines of its own since it
// may wait for the caller's outcome.
func (r *round) abandon() {
	r.mu.Lock()
	r.abandoned = true
	var queued []result
	for {
		select {
		case a := <-r.ch:
			queued = append(queued, a)
			continue
		default:
		}
		break
	}
	r.mu.Unlock()
	r.timer.Stop()
	if r.late != nil && len(queued) > 0 {
		r.wg.Go(func() {
			for _, a := range queued {
				r.late(a)
			}
		})
	}
}

// evalDo adapts one script call to fanout.
func (lk *Locker) evalDo(s *node.Script, keys []string, args ...string) func(context.Context, int) ([]node.Result, error) {
	return func(ctx context.Context, i int) ([]node.Result, error) {
		reply, err := lk.nodes[i].Eval(ctx, s, keys, args...)
		if err != nil {
			return nil, err
		}
		return []node.Result{{Reply: reply}}, nil
	}
}

// answerOf classifies a failed call.
func answerOf(name string, a result) NodeAnswer {
	if a.timeout {
		return NodeAnswer{Node: name, Kind: KindTimeout, Err: a.err}
	}
	return NodeAnswer{Node: name, Kind: KindError, Err: a.err}
}

// cleanupTimeout bounds each node's part in a release: a few node timeouts,
// since it runs on a context detached from the caller's.
func (lk *Locker) cleanupTimeout() time.Duration {
	return min(4*lk.cfg.nodeTimeout, 5*time.Second)
}

// releaseAll runs the release script on every node, detached from ctx's
// cancellation and bounded by cleanupTimeout per node. It waits for the
// answers of the nodes for which await is true (all when await is nil); the
// others are released in the background, by goroutines Close waits for.
// publish announces the release to waiters. Nodes not awaited are reported
// as KindNotAwaited.
func (lk *Locker) releaseAll(ctx context.Context, key, owner string, publish bool, await func(i int) bool) (answers []NodeAnswer, released int) {
	ch := ""
	if publish {
		ch = channelOf(key)
	}
	r := lk.fanout(context.WithoutCancel(ctx), lk.all(), lk.cleanupTimeout(),
		lk.evalDo(releaseScript, releaseKeys(key), owner, ch), nil)
	answers = make([]NodeAnswer, len(lk.nodes))
	waiting := 0
	for i := range answers {
		answers[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
		if await == nil || await(i) {
			waiting++
		}
	}
	for got := 0; waiting > 0 && got < len(lk.nodes); got++ {
		a := r.next()
		name := lk.names[a.i]
		if await == nil || await(a.i) {
			waiting--
		}
		switch {
		case a.err != nil:
			answers[a.i] = answerOf(name, a)
		case a.res[0].Err != nil:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindError, Err: a.res[0].Err}
		case a.res[0].Reply.Int(0) == 1:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindOK}
			released++
		default:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindHeld}
		}
	}
	r.abandon()
	return answers, released
}

// releaseOne undoes a late grant on node i, on a context of its own.
func (lk *Locker) releaseOne(i int, key, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), lk.cleanupTimeout())
	defer cancel()
	_, _ = lk.nodes[i].Eval(ctx, releaseScript, releaseKeys(key), owner, "")
}

func (lk *Locker) all() []int {
	idx := make([]int, len(lk.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}
