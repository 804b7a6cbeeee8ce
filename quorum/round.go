package quorum

import (
	"context"
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
	// land (see ballot.unsure), read when the call is sent, and the
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
//
// Rounds are reused (see Locker.rounds): a round, its channel and its
// timer were a third of an acquisition's allocations. The caller and each
// call hold the round until it is abandoned and delivered respectively;
// the last one to let go puts it back.
type round struct {
	req       request
	ch        chan result // buffered for every node of the Locker
	start     time.Time
	ctx       context.Context
	mu        sync.Mutex
	abandoned bool
	holds     int // the caller, until it abandons the round, and each call not yet delivered
	late      func(result)
	wg        *sync.WaitGroup
	free      *sync.Pool // where the round goes back once nobody holds it

	// Used by the caller's goroutine only.
	timer   *time.Timer
	pending []int  // nodes not answered yet, as far as the caller knows
	seen    []bool // by node: already reported by next
}

// newRound returns an idle round for lk's nodes.
func (lk *Locker) newRound() *round {
	n := len(lk.nodes)
	r := &round{ch: make(chan result, n), wg: &lk.wg, free: &lk.rounds,
		pending: make([]int, 0, n), seen: make([]bool, n), timer: time.NewTimer(time.Hour)}
	r.timer.Stop()
	return r
}

// fanout sends req to the nodes at idx, each call bounded by timeout.
// The caller must hold an operation (begin).
func (lk *Locker) fanout(ctx context.Context, idx []int, timeout time.Duration, req request, late func(result)) *round {
	r := lk.rounds.Get().(*round)
	r.req, r.start, r.ctx, r.late = req, time.Now(), ctx, late
	r.holds = len(idx) + 1
	r.pending = append(r.pending, idx...)
	deadline := r.start.Add(timeout)
	r.timer.Reset(timeout + timeout/10 + time.Millisecond)
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
	wg := r.wg
	defer wg.Done()
	a.rtt = time.Since(r.start)
	r.mu.Lock()
	if !r.abandoned {
		r.ch <- a // buffered for every node: never blocks
		r.mu.Unlock()
		r.let()
		return
	}
	r.mu.Unlock()
	if r.late != nil {
		r.late(a)
	}
	r.let()
}

// let drops one hold on r, and recycles r when it was the last.
func (r *round) let() {
	r.mu.Lock()
	r.holds--
	last := r.holds == 0
	r.mu.Unlock()
	if !last {
		return
	}
	r.req, r.ctx, r.late, r.abandoned = request{}, nil, nil, false
	r.pending = r.pending[:0]
	clear(r.seen)
	r.free.Put(r)
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
// still to come go to late. The caller must not use r after it.
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
		r.let()
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
