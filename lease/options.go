package lease

import "time"

// Options are the per-acquisition settings. Strategies fill the zero fields
// with their own defaults.
type Options struct {
	// TTL is how long the servers keep the lock without an extension.
	TTL time.Duration
	// AutoRenew starts one goroutine, owned by the lease, that extends it
	// at about a third of TTL and ends it when an extension is refused.
	AutoRenew bool
	// Retry paces a blocking acquire between attempts.
	Retry Retry
	// Metadata is stored with the lock while it is held and shown by
	// Inspect: who holds it (host, pid, job). At most MaxMetadata bytes.
	Metadata string
}

// Option changes Options; pass them to Acquire or TryAcquire.
type Option func(*Options)

// WithTTL sets the lease's time to live. Zero keeps the Locker's default
// TTL (the one its strategy's WithTTL set, else the strategy's DefaultTTL);
// a negative ttl makes the acquire fail with an *ArgError.
func WithTTL(ttl time.Duration) Option { return func(o *Options) { o.TTL = ttl } }

// WithAutoRenew keeps the lease alive until Release, or until a renewal is
// refused, which ends the lease with ErrLost.
func WithAutoRenew() Option { return func(o *Options) { o.AutoRenew = true } }

// WithRetry sets how a blocking acquire paces its attempts.
func WithRetry(r Retry) Option { return func(o *Options) { o.Retry = r } }

// WithMetadata stores metadata with the lock for as long as the lease holds
// it, for Inspect and `dlock inspect` to show who holds it: a host name, a
// process id, a job. It is at most MaxMetadata bytes; a longer one makes
// the acquire fail with an *ArgError. It travels with every call the lease
// makes to the servers, so keep it short.
func WithMetadata(metadata string) Option { return func(o *Options) { o.Metadata = metadata } }
