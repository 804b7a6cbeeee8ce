package lease

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Handle is a lease written out, for another process to take up (Resume):
// the key, owner and token the servers know it by, and the Locker that may
// take it up. Its text form (String, ParseHandle) carries a checksum. It
// holds the owner, which releases the lock: keep it as secret as the lease.
type Handle struct {
	Strategy string // "single" or "quorum"
	// Servers names the servers of the Locker that granted the lease, as
	// that strategy names them: the single server's address, or the
	// quorum's addresses, sorted and comma-separated.
	Servers string
	Key     string
	Owner   string      // Lease.Owner
	Token   fence.Token // Lease.Token; 0 for a quorum without tokens
	// TTL is the TTL the lease was granted with: what a resumed lease
	// renews with unless option.TTL says otherwise.
	TTL time.Duration
	// Waiter is, for the quorum, the Acquire call whose ticket stands at
	// the head of the queue until the lease is released; empty for none.
	Waiter string
}

// ErrForeignHandle: a handle another strategy's or other servers' Locker
// wrote. It also matches ErrInvalid.
var ErrForeignHandle = errors.New("dlock: handle of another Locker")

// handler is a backend whose leases can be written out as a Handle (see
// Lease.Handle): both strategies' backends for a lease on one key.
type handler interface {
	Handle(l *Lease) (Handle, error)
}

// Handle returns the lease written out, for another process to take up
// with Resume: an error matching ErrNotHeld once the lease has ended, an
// *ArgError for a lease on several keys or a primitive's (permits,
// rwlock, claims).
func (l *Lease) Handle() (Handle, error) {
	hb, ok := l.b.(handler)
	if !ok {
		return Handle{}, &ArgError{Arg: "lease", Value: l.g.Strategy, Rule: "must be one of the single or quorum strategy's, on one key, to be written out"}
	}
	if err := l.Err(); err != nil {
		return Handle{}, fmt.Errorf("dlock: handle of %q: %w: %w", l.g.Key, ErrNotHeld, err)
	}
	return hb.Handle(l)
}

// handlePrefix starts every handle's text; the 1 is its format's version.
const handlePrefix = "dlock1."

// handleJSON is a Handle as its text form encodes it.
type handleJSON struct {
	S string `json:"s"`
	N string `json:"n"`
	K string `json:"k"`
	O string `json:"o"`
	T uint64 `json:"t"`
	L int64  `json:"l"` // TTL, ms
	W string `json:"w,omitempty"`
}

// String returns h's text form: "dlock1.", the handle's fields (JSON, in
// unpadded base64url), "." and a checksum of them (the first 8 bytes of
// their SHA-256, in hex). It is a single word, safe in a shell variable.
func (h Handle) String() string {
	b, _ := json.Marshal(handleJSON{S: h.Strategy, N: h.Servers, K: h.Key, O: h.Owner,
		T: uint64(h.Token), L: h.TTL.Milliseconds(), W: h.Waiter})
	body := base64.RawURLEncoding.EncodeToString(b)
	return handlePrefix + body + "." + handleSum(body)
}

func handleSum(body string) string {
	s := sha256.Sum256([]byte(handlePrefix + body))
	return hex.EncodeToString(s[:8])
}

// ParseHandle reads a handle's text form (Handle.String). A text that is
// not one, cut short or edited, is an *ArgError naming handle, which does
// not quote the text.
func ParseHandle(s string) (Handle, error) {
	bad := func(rule string) (Handle, error) {
		return Handle{}, &ArgError{Arg: "handle", Value: fmt.Sprintf("(%d bytes)", len(s)), Rule: rule}
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), handlePrefix)
	if !ok {
		return bad("must start with " + handlePrefix + " (what Lease.Handle or dlock acquire wrote)")
	}
	body, sum, ok := strings.Cut(rest, ".")
	if !ok || sum != handleSum(body) {
		return bad("checksum does not match: the handle was cut short or edited")
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return bad("must be base64url after " + handlePrefix)
	}
	var j handleJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return bad("fields unreadable: " + err.Error())
	}
	switch {
	case j.S != "single" && j.S != "quorum":
		return bad("strategy must be single or quorum")
	case j.K == "" || j.O == "" || j.N == "":
		return bad("must name a key, an owner and servers")
	case j.L <= 0:
		return bad("TTL must be > 0")
	}
	return Handle{Strategy: j.S, Servers: j.N, Key: j.K, Owner: j.O, Token: fence.Token(j.T),
		TTL: time.Duration(j.L) * time.Millisecond, Waiter: j.W}, nil
}
