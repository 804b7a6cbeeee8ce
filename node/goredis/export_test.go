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

// Load returns, summed over n's batchers, how many lanes are in use and
// how many calls wait in a queue. n must come from New.
func Load(n node.Node) (busy, queued int) {
	g := n.(*goRedis)
	var bs []*batcher
	if g.one != nil {
		bs = append(bs, g.one)
	}
	g.masters.Range(func(_, b any) bool {
		bs = append(bs, b.(*batcher))
		return true
	})
	for _, b := range bs {
		b.mu.Lock()
		busy += b.busy
		queued += len(b.queue)
		b.mu.Unlock()
	}
	return busy, queued
}

// MaxLanes is how many batches one server may have in flight at once.
const MaxLanes = maxLanes
