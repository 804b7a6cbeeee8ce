package lease

import (
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Info is one lock as its servers see it, at about one instant: what
// Inspect reports, changing nothing. For the quorum, Held, Owner, Token
// and TTL are a majority's.
type Info struct {
	Key      string
	Held     bool          // one owner holds the lock with time left
	Owner    string        // the holder's Lease.Owner; whoever knows it can release the lock
	Metadata string        // what the holder stored with option.Metadata
	Token    fence.Token   // the holder's token; when free, the last one handed out (0: none)
	TTL      time.Duration // the time the holder has left by the servers' clocks
	Quorum   int           // how many servers a lock needs: 1, or N/2+1
	Nodes    []NodeInfo    // each server's answer, in the Locker's order
}

// NodeInfo is one server's view of a lock. SinceLoss, SitsOut and
// Unrepaired are a quorum node's, under the lost-data guard
// (docs/quorum.md): how long ago it last lost or may have lost its data
// (0 when unknown), how much longer its votes do not count, and whether
// its fence counters still wait for their repair.
type NodeInfo struct {
	Node       string        // the server's address
	Owner      string        // the owner there; empty when free there
	Metadata   string        // the owner's metadata there
	TTL        time.Duration // time the lock has left there
	Counter    fence.Token   // the key's fence counter there (a quorum node's repair floor at least)
	SinceLoss  time.Duration
	SitsOut    time.Duration
	Unrepaired bool
	Err        error // the server did not answer in time, or failed
}

// MaxMetadata is the largest metadata option.Metadata accepts, in bytes.
const MaxMetadata = 512

// Broken is what an operator's break (ForceRelease) found and did. Show
// Token to the key's fence (fence.Guard.Admit, fence.Store.Put) and the
// old holder's late writes are refused.
type Broken struct {
	Key             string
	Held            bool        // a lease held the key (for the quorum, on a majority of those that answered)
	Owner, Metadata string      // the old holder's, when Held
	Was             fence.Token // the old holder's token; when not Held, the last one handed out
	Token           fence.Token // the break's own, above every earlier token of the key
}
