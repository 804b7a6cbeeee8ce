package claims

// Base names the queue's items hash, the base of its other keys, for tests
// that look at the server.
func Base(q *Queue) string { return q.keys[0] }

// The scripts, for tests that run one transition by hand.
var (
	ClaimScript   = claimScript
	AbandonScript = abandonScript
)
