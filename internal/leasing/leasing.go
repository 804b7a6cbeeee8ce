// Package leasing is a strategy's side of a lease.Lease: what it won
// (Grant) and who hears what becomes of the lease (Reporter). Package
// lease holds the holder's side; it registers its constructor here, so
// that strategies can hand out leases without the holder's package
// exporting how.
package leasing

import (
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Grant is what a strategy learned when it acquired a lock.
type Grant struct {
	Key   string      // for a lease on several keys, the first (Set[0].Key)
	Owner string      // the value that identifies this lease on the servers
	Token fence.Token // 0 when the strategy hands out no token; Key's own
	// Set is every key of a lease held on several keys at once, with its
	// token, in the order they were asked for; nil for a lease on one key.
	Set   []Held
	TTL   time.Duration // the TTL asked for; renewal asks for it again
	Until time.Time     // local monotonic end of validity, drift taken off

	Strategy  string   // "single", "quorum", or a primitive's name: for errors
	Reporter  Reporter // hears renewals, loss and release; may be nil
	AutoRenew bool     // keep the lease renewed until Release
	Metadata  string   // stored with the lock
	// Short says Until falls short of a TTL from now: the servers granted
	// the lease for less, as a lock handed over to a waiter, bounded by
	// its ticket, is. The lease then extends itself to TTL at once, in
	// the background, as a renewal: it is valid meanwhile, until Until.
	Short bool
}

// Held is one key of a lease and the fencing token it was granted with
// (lease.Held).
type Held struct {
	Key   string
	Token fence.Token
}

// Event says what became of a lease after its grant.
type Event uint8

const (
	Renewed  Event = iota + 1 // an extension ended; err is nil when the servers agreed
	Lost                      // the lease ended before Release: err is lease.ErrLost or ErrExpired
	Released                  // a Release ended the lease; err is its error, if any
)

// Reporter hears what becomes of leases after their grant, each named by
// its Grant's Strategy and Key. A Locker builds one for all its leases.
// Report is called synchronously on the path it reports and must not
// block.
type Reporter interface {
	Report(e Event, strategy, key string, err error)
}

// New returns the *lease.Lease for g, backed by b, which must implement
// the Extend and Release methods package lease documents for a backend.
// Package lease sets it when it is initialised; strategies call it
// through a typed wrapper (engine.NewLease).
var New func(b any, g Grant) any
