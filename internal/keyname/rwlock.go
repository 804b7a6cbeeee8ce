package keyname

import "strings"

// RWLock returns the base key of the read-write lock on key (package
// rwlock): the lock's hash; every other key and channel of the lock is
// named by appending ":suffix" to it, so they share its cluster slot. The
// hash tag is the key itself, dlock:rw:{KEY}, except for a key that
// starts with "}", which is escaped as Single escapes one, in
// dlock:rw:%{...}. No name of a single lock's, a permit's or a queue's
// keys starts with "dlock:rw:", so the kinds never share a key.
func RWLock(key string) string {
	if strings.HasPrefix(key, "}") {
		return "dlock:rw:%{" + tagEscaper.Replace(key) + "}"
	}
	return "dlock:rw:{" + key + "}"
}
