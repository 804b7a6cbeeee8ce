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

// CheckContext returns an *ArgError when ctx is nil.
func CheckContext(ctx context.Context) error { return argerr.CheckContext(ctx) }

// CheckKey returns an *ArgError when key cannot name a lock.
func CheckKey(key string) error {
	if key == "" {
		return &argerr.Error{Arg: "key", Value: key, Rule: "must not be empty"}
	}
	return nil
}
