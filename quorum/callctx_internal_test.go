package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCallCtx: a worker's context ends at each batch's deadline, and only
// then, however often it is re-armed, disarmed and re-armed again.
func TestCallCtx(t *testing.T) {
	c := newCallCtx()
	defer c.stop()

	c.arm(time.Now().Add(20 * time.Millisecond))
	if d, ok := c.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
		t.Fatalf("Deadline = %v, %v; want the armed one", d, ok)
	}
	if c.Err() != nil {
		t.Fatalf("Err before the deadline = %v; want nil", c.Err())
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed a second after a 20ms deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline = %v; want DeadlineExceeded", c.Err())
	}
	c.disarm()
	// Fired, it stays ended: a context derived from it may read its Err
	// after its Done closed.
	if !c.spent() || c.Err() == nil {
		t.Fatal("a fired callCtx is not spent")
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) && !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("child's Err = %v; want the parent's end", child.Err())
	}

	// A fresh one, re-armed between calls, fires only at its deadline.
	c = newCallCtx()
	defer c.stop()
	c.arm(time.Now().Add(time.Hour))
	c.disarm()
	c.arm(time.Now().Add(time.Hour))
	select {
	case <-c.Done():
		t.Fatal("Done closed after arming for an hour")
	default:
	}
	c.disarm()

	// Disarmed before its deadline: it never fires, even when the timer
	// does (fire ignores an early or stale firing).
	c.arm(time.Now().Add(10 * time.Millisecond))
	c.disarm()
	c.fire()
	time.Sleep(30 * time.Millisecond)
	if c.Err() != nil {
		t.Fatalf("Err after disarming = %v; want nil", c.Err())
	}

	// A call that timed out by the client's own clock, a little before
	// the context's, is a timeout too.
	if !c.timedOut(context.DeadlineExceeded) || c.timedOut(nil) || c.timedOut(errors.New("EOF")) {
		t.Error("timedOut: want true for a deadline error only (with the context not ended)")
	}
}
