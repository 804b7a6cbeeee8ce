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
