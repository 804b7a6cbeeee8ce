//go:build !race

package ratelimit_test

// shareCallers is how many callers TestContendedShare's short case runs
// (see race_test.go for the race detector's).
const shareCallers = 48
