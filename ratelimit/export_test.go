package ratelimit

import "time"

// Interval returns l's emission interval, Per/Rate rounded up to a µs, as
// the servers count it.
func Interval(l Limit) time.Duration { return l.interval() }
