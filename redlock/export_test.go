package redlock

import "github.com/dlockgo/dlock/node"

// TokenFor exposes the token arithmetic to the tests.
var TokenFor = tokenFor

// ErrNotRepaired is the error of a vote from a node that sat out its loss
// but is not repaired yet.
var ErrNotRepaired = errNotRepaired

// Scripts lists every script, for tests that must preload them.
func Scripts() []*node.Script {
	return []*node.Script{epochScript, acquireScript, commitScript, repairScript, extendScript, releaseScript}
}
