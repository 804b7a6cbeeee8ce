package rwlock

// ClaimScript is the claim script, for tests that run a claim by hand.
var ClaimScript = scripts.Claim
