// Package cached tells a node adapter which scripts its server has been
// seen to hold in its script cache, so that a pipeline can send a script
// it has not seen in full (EVAL) rather than by SHA1 (EVALSHA).
//
// That keeps a pipeline's calls in order: a call answered NOSCRIPT did not
// run, and sent again after the pipeline it runs after the calls behind
// it, which did. A server that lost its cache (a restart, SCRIPT FLUSH)
// since a script was seen still answers NOSCRIPT once; Forget then makes
// the next pipeline send it in full again.
package cached

import (
	"sync"

	"github.com/dlockgo/dlock/node"
)

// Set is the scripts seen cached. The zero value is empty and ready;
// it is safe for concurrent use.
type Set struct{ m sync.Map }

// Has reports whether s was seen cached (and not forgotten since).
func (c *Set) Has(s *node.Script) bool {
	_, ok := c.m.Load(s)
	return ok
}

// Mark records that the server ran s.
func (c *Set) Mark(s *node.Script) {
	if !c.Has(s) {
		c.m.Store(s, struct{}{})
	}
}

// Forget records that the server answered NOSCRIPT for s.
func (c *Set) Forget(s *node.Script) { c.m.Delete(s) }
