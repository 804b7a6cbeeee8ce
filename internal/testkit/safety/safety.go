// Package safety measures what a lock's failures cost the resource it
// protects. A fault test runs its lock holders against a Resource, which
// records every grant, write and read; Check then counts, over that
// history, the holders that believed at the same time that they held the
// lock, the writes a stale holder got accepted, the writes the fence
// refused, and whether the fenced register stayed linearizable
// (checked with porcupine). CheckOrder checks the tokens of a key's
// acquisitions against the order they were asked for in. Every violation
// found is also listed, dated by the grant that caused it, so that Classify
// can hold a lock to the promises it makes at each moment: a fault test
// gives the Windows in which a fault suspends a promise.
//
// Times are time.Time values from time.Now, so intervals taken in one
// process compare by the monotonic clock; hand-made histories without a
// monotonic reading compare by the wall clock.
package safety

import (
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Lease is what the Resource reads of a holder's lease; *lease.Lease
// satisfies it. Owner must be unique per lease: it names the holder.
type Lease interface {
	Owner() string
	Token() fence.Token
	TTL() time.Duration
}

// Part is one key of a lease held on several keys at once (see
// lease.Lease.Keys), as a Resource sees a lease: l's owner and validity,
// with that key's token.
func Part(l Lease, token fence.Token) Lease { return part{l, token} }

type part struct {
	Lease
	token fence.Token
}

func (p part) Token() fence.Token { return p.token }

// Grant is one lease as its holder saw it: held from At, valid until Until
// by the holder's own clock.
type Grant struct {
	Holder string
	Token  fence.Token
	At     time.Time
	Until  time.Time
}

// Release is the moment a holder gave its lease up, which ends the lease's
// interval before its validity ran out.
type Release struct {
	Holder string
	At     time.Time
}

// OpKind tells a write from a read.
type OpKind uint8

const (
	Write OpKind = iota + 1
	Read
)

func (k OpKind) String() string {
	switch k {
	case Write:
		return "write"
	case Read:
		return "read"
	}
	return "Kind(?)"
}

// Outcome is what became of an operation.
type Outcome uint8

const (
	// Accepted: the write took effect, or the read returned.
	Accepted Outcome = iota + 1
	// Refused: the fence refused the write (a stale token); it took no effect.
	Refused
	// Unknown: the operation failed otherwise (a timeout, a broken
	// connection); a write may or may not have taken effect.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Refused:
		return "refused"
	case Unknown:
		return "unknown"
	}
	return "Outcome(?)"
}

// Op is one operation on the resource, between its Call and Return.
type Op struct {
	Kind    OpKind
	Holder  string      // writes: the lease's owner
	Token   fence.Token // writes: the token carried; reads: the token read
	Fenced  bool        // writes: whether the fence judged the token
	Value   string      // writes: the value written; reads: the value read
	Outcome Outcome
	Err     error // set unless Accepted
	Call    time.Time
	Return  time.Time
	// ValidUntil is, for a write, the end of the holder's lease by its own
	// clock as it wrote: Call plus the lease's TTL, which is 0 once the
	// holder's lease has ended.
	ValidUntil time.Time
}

// History is what a Resource recorded, in the order it recorded it.
type History struct {
	Grants   []Grant
	Releases []Release
	Ops      []Op
	Breaks   []Break
}
