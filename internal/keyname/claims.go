package keyname

import "strings"

// Claims returns the base key of the work queue name (package claims):
// the queue's items hash; every other key and channel of the queue is
// named by appending ":suffix" to it, so they share its cluster slot. The
// hash tag is the name itself, dlock:claims:{NAME}, except for a name that
// starts with "}", which is escaped as Single escapes a key, in
// dlock:claims:%{...}. No name of a single lock's key starts with
// "dlock:claims:", so a queue and a lock never share a key.
func Claims(name string) string {
	if strings.HasPrefix(name, "}") {
		return "dlock:claims:%{" + tagEscaper.Replace(name) + "}"
	}
	return "dlock:claims:{" + name + "}"
}
