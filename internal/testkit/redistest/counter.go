package redistest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/node"
)

// Counter is a node that counts the runs of one script sent through it,
// alone or in a pipeline: how a test tells that a waiter asked the server,
// or that it did not. Its methods are safe for concurrent use.
type Counter struct {
	node.Node
	Script *node.Script
	n      atomic.Int32
}

// Runs is how many times the script was sent so far.
func (c *Counter) Runs() int32 { return c.n.Load() }

func (c *Counter) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if s == c.Script {
		c.n.Add(1)
	}
	return c.Node.Eval(ctx, s, keys, args...)
}

func (c *Counter) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	for _, call := range calls {
		if call.Script == c.Script {
			c.n.Add(1)
		}
	}
	return c.Node.Pipeline(ctx, calls, wait)
}

// Await waits, up to 5 s, until the script was sent want times, and
// fails t when it was not. early, when not nil, is polled meanwhile: a
// test that waits for a call that must come before some outcome passes
// one that fails t when the outcome came first.
func (c *Counter) Await(t testing.TB, want int32, early func()) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.Runs() < want && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if early != nil {
			early()
		}
	}
	if got := c.Runs(); got != want {
		t.Fatalf("redistest: the script %.12s… was sent %d times; want %d", c.Script.SHA(), got, want)
	}
}
