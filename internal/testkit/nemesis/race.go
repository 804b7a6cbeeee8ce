//go:build race

package nemesis

// raceDetector is 1 when the tests run with the race detector, which
// slows every call five to ten times (see TestNemesis and rateLoad.pace), and
// 0 when they do not.
const raceDetector = 1
