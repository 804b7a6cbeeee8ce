package ratelimit

import "time"

// Interval returns l's emission interval, Per/Rate rounded up to a µs, as
// the servers count it.
func Interval(l Limit) time.Duration { return l.interval() }

// Repairs returns how many refunds l's quorum calls made and skipped, and
// how many charges they made.
func Repairs(l *Limiter) (refunded, skipped, charged int64) {
	return l.refunded.Load(), l.unrefunded.Load(), l.charged.Load()
}
