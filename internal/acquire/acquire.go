// Package acquire is the machinery the two strategies share on the way
// from a caller's key to a Lease: argument checks, the validity arithmetic,
// owner values, the retry loop of a blocking acquire, and the events an
// Observer hears. Package lease is what the caller holds; this is how the
// strategies get there.
package acquire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// Detached returns a context with ctx's values but not its end, bounded by
// d: for the cleanup a call owes the servers after its caller gave up.
func Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// Cleanup runs s on n with keys and args on a context detached from ctx,
// bounded by lease.ReleaseTimeout, and ignores the outcome: the cleanup a
// call owes the server after its caller gave up or its exchange failed
// (abandon a claim, leave a queue, release a grant that came too late),
// whose loss the server's own expiry makes good.
func Cleanup(ctx context.Context, n node.Node, s *node.Script, keys []string, args ...string) {
	ctx, cancel := Detached(ctx, lease.ReleaseTimeout)
	defer cancel()
	_, _ = n.Eval(ctx, s, keys, args...)
}

// NewOwner returns a random value that identifies one lease on the servers.
func NewOwner() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// OwnerIDLen is the length of an owner's random part, in hex digits.
const OwnerIDLen = 32

// OwnerValue returns the value stored for an owner: its random id, then a
// space and the metadata when there is some. Every script compares the
// whole value, so metadata needs no script of its own.
func OwnerValue(id, metadata string) string {
	if metadata == "" {
		return id
	}
	return id + " " + metadata
}

// Metadata returns the metadata part of an owner value (see OwnerValue).
func Metadata(value string) string {
	if len(value) > OwnerIDLen && value[OwnerIDLen] == ' ' {
		return value[OwnerIDLen+1:]
	}
	return ""
}

// CheckMetadata returns an *ArgError when metadata is longer than
// lease.MaxMetadata.
func CheckMetadata(metadata string) error {
	if len(metadata) > lease.MaxMetadata {
		return &argerr.Error{Arg: "metadata", Value: fmt.Sprintf("%d bytes", len(metadata)),
			Rule: fmt.Sprintf("must be at most %d bytes (lease.MaxMetadata)", lease.MaxMetadata)}
	}
	return nil
}

// CheckContext returns an *ArgError when ctx is nil.
func CheckContext(ctx context.Context) error { return argerr.CheckContext(ctx) }

// CheckKey returns an *ArgError when key cannot name a lock.
func CheckKey(key string) error {
	if key == "" {
		return &argerr.Error{Arg: "key", Value: key, Rule: "must not be empty"}
	}
	return nil
}

// Options checks ctx and key and returns base with opts applied in order,
// a zero TTL keeping base's. A strategy's New has checked base; when opts
// change it (changed is true), Options checks the retry policy and the
// metadata, and the caller checks the TTL by its own rules. Without opts,
// base stays on the caller's stack.
func Options(ctx context.Context, key string, base lease.Options, opts []lease.Option) (o lease.Options, changed bool, err error) {
	if err := CheckContext(ctx); err != nil {
		return base, false, err
	}
	if err := CheckKey(key); err != nil {
		return base, false, err
	}
	if len(opts) == 0 {
		return base, false, nil
	}
	o = Apply(base, opts...)
	if o.TTL == 0 {
		o.TTL = base.TTL
	}
	if err := o.Retry.Check(); err != nil {
		return o, true, err
	}
	return o, true, CheckMetadata(o.Metadata)
}

// Apply returns base with opts applied in order.
func Apply(base lease.Options, opts ...lease.Option) lease.Options {
	for _, opt := range opts {
		if opt != nil {
			opt(&base)
		}
	}
	return base
}
