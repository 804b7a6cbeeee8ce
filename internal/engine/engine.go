// Package engine is the machinery the strategies and primitives share on
// the way from a caller's key to a Lease, written once.
//
// For both strategies: the argument checks (check.go), the validity
// arithmetic (validity.go), owner values (owner.go), the readers of
// script replies (reply.go), the retry loop of a blocking acquire
// (wait.go), the cleanup a failed exchange owes the servers (cleanup.go)
// and the events an Observer hears (observe.go). What the options say,
// the pace of the retries and the drift margin among them, is package
// settings'.
//
// For the single-server primitives (single, permits, rwlock and claims),
// the claim engine (claim.go): their shared configuration (Base, resolved
// by Configure), the exchange of a claim with the server and the retry
// rule of a blocking acquire (Run, Granted, Classify), the refusals and
// their errors (Refusal, ErrLate, Refused), the cleanup a claim owes the
// server after its caller gave up or its exchange failed (Abandon, Leave,
// ReleaseDetached), and Extend and Release as the backend of a lease.
// Their scripts are assembled by the subpackage lua from the one Lua
// library: the clock, the token floor, the 2^53 guard, the idle expiry of
// the key's hash, gone owners and the ticket queue.
//
// Each strategy and primitive keeps only what is its own: one holder
// (single), slots (permits), readers and a writer (rwlock), items
// (claims), the quorum's votes and epoch: the layout of its keys, its
// scripts' bodies, the replies they give and the leases it builds from
// them. Package lease is what the caller holds; this is how the
// strategies get there.
package engine
