package single

// HashKey names the lock's hash on the server, for tests that look at it.
var HashKey = hashKey

// The scripts, for tests that run one transition by hand.
var (
	ClaimScript   = claimScript
	AbandonScript = abandonScript
	ReleaseScript = releaseScript
)

// LeaveScript gives up a waiter's place, for tests that run it by hand.
var LeaveScript = leaveScript
