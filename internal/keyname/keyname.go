// Package keyname names the server keys a lock of each strategy uses, for
// the strategies and for the tests that count what they leave on a server.
package keyname

import "strings"

// Single returns the single strategy's hash for key; every other key and
// channel of the lock is named by appending ":suffix" to it, so they share
// its cluster slot. The hash tag is the key itself, dlock:{KEY}, except for
// a key that starts with "}", which would make that an empty tag (the whole
// name would then be hashed, and the lock's keys spread over slots): such
// a key is written escaped ("%" as %25, "}" as %7D) in a tag of its own
// prefix, dlock:%{...}, which no other key's name can start with.
func Single(key string) string {
	if strings.HasPrefix(key, "}") {
		return "dlock:%{" + tagEscaper.Replace(key) + "}"
	}
	return "dlock:{" + key + "}"
}

var tagEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

// Quorum returns the prefix of the quorum strategy's keys for key: each is
// the prefix followed by ":lock", ":fence", ":gone", ":queue" and so on.
// Quorum nodes are standalone servers, so no slot constrains the name.
func Quorum(key string) string { return "dlock:{" + key + "}" }

// NodeWide lists the quorum's node-wide keys, which belong to no lock.
var NodeWide = []string{"dlock:epoch", "dlock:high", "dlock:floor", "dlock:repaired"}
