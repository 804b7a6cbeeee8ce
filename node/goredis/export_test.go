package goredis

import (
	"time"

	"github.com/dlockgo/dlock/node"
)

// ReaderEnded reports whether n's subscription reader, if it ever started,
// ends within d. n must come from New.
func ReaderEnded(n node.Node, d time.Duration) bool {
	g := n.(*goRedis)
	g.mu.Lock()
	done := g.done
	g.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
