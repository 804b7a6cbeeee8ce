package quorum

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
)

// callCtx is a worker's context for its calls, re-armed with each batch's
// deadline instead of a context.WithDeadline per call: a new context, its
// timer and its channel were a third of an acquisition's allocations. A
// worker runs one call at a time, so no call sees the deadline of another.
// Once it has fired (Done closed), a callCtx ends for good, as a context
// must: a context a client derived from it may still be waiting on its Done
// and then read its Err, which must not be nil. The worker then takes a
// fresh one (see spent).
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

// arm sets the deadline of the next call; c must not be spent.
func (c *callCtx) arm(deadline time.Time) {
	c.mu.Lock()
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

// spent reports whether c has fired, and so cannot serve another call.
func (c *callCtx) spent() bool { return c.Err() != nil }

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
