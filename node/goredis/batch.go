package goredis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxLanes caps the batches one server has in flight at once. A lane is
// a round trip on a connection of its own. Two lanes already let the
// client write and parse one batch while the server (single-threaded)
// runs the other; more lanes only split the same calls into smaller
// batches, each a write and a read of its own. Four is what valkey-go
// runs per node by default (four pipelined connections), and it lets up
// to four concurrent callers go out at once, each on a free lane, as fast
// as a call sent alone. Measured on two cores with a one-INCR
// script, two and four lanes both took 64 callers from about 45k to
// 185k calls/s; at 4 and 16 callers four did as well or better, and two
// allocated more per call in batches of two.
const maxLanes = 4

// lanesFor returns how many lanes a client whose pool holds poolSize
// connections gets: never more than its pool, as a lone call that waited
// for a pooled connection would hold its lane, and the calls queued for
// it, meanwhile.
func lanesFor(poolSize int) int {
	return min(maxLanes, max(1, poolSize))
}

// batcher sends the commands of concurrent callers to one server
// together, group-commit style: a call that finds a lane free goes out
// at once, alone and as a plain command under its caller's ctx; calls
// that come while every lane is busy queue, and go out as one pipeline
// when a lane frees. The caller whose lone call frees the lane hands the
// queue to a goroutine of the batcher's, which sends it and every queue
// that has formed behind it, and ends when it finds the queue empty: the
// batcher has no goroutine while it is idle. A waiting caller is never
// made the sender of a batch: it could then neither return when its ctx
// ends (a pipeline cannot be left half read) nor return as soon as its
// own reply is in.
type batcher struct {
	c     redis.UniversalClient // whose Pipeline carries the batches
	lanes int

	mu      sync.Mutex
	busy    int // lanes in use; the queue is empty while one is free
	queue   []*queued
	spare   []*queued     // a drained queue's array, for the next queue
	closed  bool          // set by close: new calls go out alone, uncounted
	drained chan struct{} // made by close, closed when busy reaches 0
}

// queued is one caller's command waiting for, or in, a batch. One whose
// caller took its reply goes back to queuedPool: only that caller holds
// it then. One whose caller gave up is left to the collector, as the
// batch may still hold it.
type queued struct {
	ctx  context.Context
	argv []any
	cmd  *redis.Cmd    // set before done is sent
	done chan struct{} // sent once, when cmd holds the reply or error
	gone atomic.Bool   // the caller stopped waiting
	strs [16]string    // room for detach: the script, and keys and args as in largeEvalMem
}

var queuedPool = sync.Pool{New: func() any { return &queued{done: make(chan struct{}, 1)} }}

func newBatcher(c redis.UniversalClient, lanes int) *batcher {
	return &batcher{c: c, lanes: lanes}
}

// do runs the command argv and returns it, with its reply or error. A
// caller whose ctx ends while its command waits in the queue or in a
// batch returns at once, with ctx's error: the command may still be
// sent, as when any reply is lost, unless it was still queued when the
// batch formed. The *string elements of argv are read after do returns
// then, so do copies their strings first when the call queues.
func (b *batcher) do(ctx context.Context, argv []any) *redis.Cmd {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return b.c.Do(ctx, argv...)
	}
	if b.busy < b.lanes {
		b.busy++
		b.mu.Unlock()
		return b.lone(ctx, argv)
	}
	q := queuedPool.Get().(*queued)
	q.ctx, q.argv = ctx, q.detach(argv)
	b.queue = append(b.queue, q)
	b.mu.Unlock()
	select {
	case <-q.done:
		cmd := q.cmd
		q.ctx, q.argv, q.cmd = nil, nil, nil
		clear(q.strs[:])
		queuedPool.Put(q)
		return cmd
	case <-ctx.Done():
		q.gone.Store(true)
		cmd := redis.NewCmd(ctx, argv...)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// lone sends argv by itself on the lane do took for it.
func (b *batcher) lone(ctx context.Context, argv []any) *redis.Cmd {
	defer b.release()
	return b.c.Do(ctx, argv...)
}

// release frees the lane of a lone call, or hands it, with the queue
// that formed meanwhile, to a goroutine that sends the queue.
func (b *batcher) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.free()
		b.mu.Unlock()
		return
	}
	batch := b.take()
	b.mu.Unlock()
	go b.send(batch)
}

// send sends batch, then each queue that formed behind it, until it
// finds none; then it frees its lane and ends.
func (b *batcher) send(batch []*queued) {
	for {
		b.exec(batch)
		clear(batch)
		b.mu.Lock()
		if b.spare == nil {
			b.spare = batch[:0]
		}
		if len(b.queue) == 0 {
			b.free()
			b.mu.Unlock()
			return
		}
		batch = b.take()
		b.mu.Unlock()
	}
}

// take returns the queue and starts a new one. b.mu is held.
func (b *batcher) take() []*queued {
	batch := b.queue
	b.queue, b.spare = b.spare, nil
	return batch
}

// free gives back a lane. b.mu is held.
func (b *batcher) free() {
	b.busy--
	if b.busy == 0 && b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
}

// exec sends the calls of batch whose callers still wait as one
// pipeline, and hands each its command.
//
// The pipeline runs under the values of the first such caller's ctx (so
// a hook or a tracer sees it in one caller's trace) without its
// cancellation: one caller that gives up must not fail the calls of the
// others. Its deadline is the latest of theirs, when each has one: past
// it nobody waits for a reply, and a client made with
// ContextTimeoutEnabled then frees the lane; with no ContextTimeoutEnabled
// go-redis ends a batch by its ReadTimeout and WriteTimeout, as it ends a
// lone call.
func (b *batcher) exec(batch []*queued) {
	var (
		ctx      context.Context
		deadline time.Time
		bounded  = true
	)
	p := b.c.Pipeline()
	for _, q := range batch {
		if q.gone.Load() {
			q.cmd = nil
			continue
		}
		if ctx == nil {
			ctx = q.ctx
		}
		if d, ok := q.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(deadline) {
			deadline = d
		}
		q.cmd = p.Do(q.ctx, q.argv...)
	}
	if ctx != nil {
		ctx = context.WithoutCancel(ctx)
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		// Each command carries its own reply or error, an I/O error of
		// the pipeline included.
		_, _ = p.Exec(ctx)
	}
	for _, q := range batch {
		if q.cmd == nil {
			// Not sent: its caller is gone, and reads nothing.
			continue
		}
		q.done <- struct{}{}
	}
}

// close makes new calls go out alone, and returns a channel closed once
// no lane is in use: then no goroutine of b runs, nor can start.
func (b *batcher) close() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	done := make(chan struct{})
	if b.busy == 0 {
		close(done)
	} else {
		b.drained = done
	}
	return done
}

// detach points the *string elements of argv at copies of their strings,
// in q.strs when they fit, so that a caller who returns before its queued
// command is sent may reuse the slices they pointed into.
func (q *queued) detach(argv []any) []any {
	n := 0
	for _, a := range argv {
		if _, ok := a.(*string); ok {
			n++
		}
	}
	strs := q.strs[:0]
	if n > len(q.strs) {
		strs = make([]string, 0, n)
	}
	for i, a := range argv {
		if p, ok := a.(*string); ok {
			strs = append(strs, *p)
			argv[i] = &strs[len(strs)-1]
		}
	}
	return argv
}
