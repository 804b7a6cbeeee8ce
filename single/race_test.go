//go:build race

package single_test

// The race detector makes sync.Pool drop items at random, so allocation
// counts are not meaningful under it.
func init() { raceEnabled = true }
