package single

// HashKey names the lock's hash on the server, for tests that look at it.
var HashKey = hashKey
