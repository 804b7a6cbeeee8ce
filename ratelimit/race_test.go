//go:build race

package ratelimit_test

// shareCallers is how many callers TestContendedShare's short case runs:
// under the race detector, which slows every call five to ten times, 16
// (48 starved two cores beside another package's tests, and the quorum's
// refunds fell behind: 31% of the ideal admitted once). At 16 callers a
// quorum without refunds still admitted 71%: the check that fails on it
// is the 48 callers' without the detector, which scripts/test-servers.sh
// runs on Valkey 8.0 and Redis 7.4.
const shareCallers = 16
