// Package fence gives a protected resource the means to refuse a stale lock
// holder: every lease carries a Token, every write to the resource carries
// the token of the lease it was done under, and the resource refuses a write
// whose token is older than the highest it has already seen.
//
// A lease that expired while its holder was paused (GC, a stalled VM, a slow
// disk) still carries its old token, so its late write is refused at the
// resource rather than merely warned about at the lock.
package fence

import (
	"errors"
	"strconv"
	"sync"
)

// Token orders the leases of one lock: a lease granted later carries a larger
// token. The zero Token is never handed out; it stands for "no token".
type Token uint64

// String returns the decimal form of t.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ErrStale is returned when a write carries a token older than the highest
// the resource has seen.
var ErrStale = errors.New("dlock: stale fencing token")

// Guard is an in-memory fence: it records the highest token seen per
// resource. The zero Guard is ready to use and safe for concurrent use.
type Guard struct {
	mu      sync.Mutex
	highest map[string]Token
}

// Admit records t for resource and returns nil when t is at least the
// highest token seen for resource, so the holder of the current lease may
// write any number of times. It returns an error matching ErrStale, and
// records nothing, when t is older. The zero Token is always refused.
func (g *Guard) Admit(resource string, t Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.highest[resource]; t < h || t == 0 {
		return &StaleError{Resource: resource, Token: t, Highest: h}
	}
	if g.highest == nil {
		g.highest = make(map[string]Token)
	}
	g.highest[resource] = t
	return nil
}

// Highest returns the highest token admitted for resource, or 0.
func (g *Guard) Highest(resource string) Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[resource]
}

// StaleError reports a refused write: the token it carried and the highest
// the resource had seen. It matches ErrStale with errors.Is.
type StaleError struct {
	Resource string
	Token    Token
	Highest  Token
}

// Error names the resource and tells the two tokens apart by their last
// digits only: tokens stay out of logs in full.
func (e *StaleError) Error() string {
	return "dlock: stale fencing token for " + strconv.Quote(e.Resource) +
		": got " + e.Token.abbrev() + ", resource has seen " + e.Highest.abbrev()
}

// abbrev returns the last four digits of t, or all of a shorter one.
func (t Token) abbrev() string {
	s := t.String()
	if len(s) <= 4 {
		return s
	}
	return "…" + s[len(s)-4:]
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }
