package permits

// HashKey names a name's hash on the server, for tests that look at it.
var HashKey = hashKey

// ClaimScript is the claim script, for tests that run a claim by hand.
var ClaimScript = scripts.Claim
