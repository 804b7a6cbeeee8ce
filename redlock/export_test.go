package redlock

import "github.com/dlockgo/dlock/node"

// TokenFor exposes the token arithmetic to the tests.
var TokenFor = tokenFor

// ErrNotRepaired is the error of a vote that could not count for want of a
// repaired counter.
var ErrNotRepaired = errNotRepaired

// Scripts lists every script, for tests that must preload them.
func Scripts() []*node.Script {
	return []*node.Script{epochScript, acquireScript, commitScript, extendScript, releaseScript}
}
