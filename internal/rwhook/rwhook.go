// Package rwhook switches a rule of package rwlock off, for this module's
// tests: a checker shows it can fail by finding what the rule prevents
// once the rule is off. It is internal to the module, so no program
// outside it can reach the switch, and package rwlock only sets the hook:
// nothing calls it but a test.
package rwhook

// UnraiseReaders, set by package rwlock when it is linked in, takes a
// *rwlock.Locker and makes its readers' claims follow the rule before the
// first reader after a writer raised the counter: readers take the token
// of the writer before them, so that a late write of that writer, paused
// past its lease, passes a fence the readers have shown their token to.
// It panics when given anything else. It cannot be undone: build a new
// Locker instead.
var UnraiseReaders func(locker any)
