package keyname

import "strings"

// Rate returns the key of the rate limit on key (package ratelimit): its
// theoretical arrival time, the limit's only key. The hash tag is the key
// itself, dlock:rate:{KEY}, except for a key that starts with "}", which
// is escaped as Single escapes a key, in dlock:rate:%{...}. No single
// lock's key and no queue's starts with "dlock:rate:".
func Rate(key string) string {
	return "dlock:rate:" + strings.TrimPrefix(Single(key), "dlock:")
}
