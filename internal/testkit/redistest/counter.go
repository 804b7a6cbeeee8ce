package redistest

import (
	"context"
	"sync/atomic"

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
