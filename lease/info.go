package lease

import (
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Info is the state of one lock as its servers see it, at about one
// instant: what Inspect reports. Inspect changes nothing on the servers.
type Info struct {
	Key string
	// Held reports whether one owner holds the lock with time left: on
	// the server (single), or on a majority of the nodes (quorum).
	Held bool
	// Owner is the holder's owner value (Lease.Owner); empty when not
	// Held. Whoever knows it can release the lock: show it shortened.
	Owner string
	// Metadata is what the holder stored with option.Metadata; empty when
	// none, or not Held.
	Metadata string
	// Token is the holder's fencing token when Held (for the quorum, the
	// highest counter among the nodes holding it); otherwise the last
	// token handed out for the key, 0 if none.
	Token fence.Token
	// TTL is the time the holder has left by the servers' clocks (for the
	// quorum, while a majority still holds it); 0 when not Held.
	TTL time.Duration
	// Quorum is how many servers a lock needs: 1 for single, N/2+1 for
	// the quorum.
	Quorum int
	// Nodes holds each server's answer, in the order the Locker was given
	// them: one for single.
	Nodes []NodeInfo
}

// NodeInfo is one server's view of a lock.
type NodeInfo struct {
	Node     string        // the server's name (its address)
	Owner    string        // the owner there; empty when free there
	Metadata string        // the owner's metadata there
	TTL      time.Duration // time the lock has left there; 0 when free
	// Counter is the server's fence counter for the key: the single
	// strategy's attempts, the quorum's effective counter (max of the
	// key's counter and the node's repair floor).
	Counter fence.Token
	// SinceLoss is, for a quorum node with the lost-data guard, how long
	// ago it was restarted, flushed or first used, by its own clock: when
	// it last lost, or may have lost, its data. A node not voted on since
	// it started counts from now: its first vote stamps it. 0 when unknown.
	SinceLoss time.Duration
	// SitsOut is how long such a node still sits out, its vote not
	// counted, judged by the inspecting Locker's max TTL (plus node
	// timeout and drift); 0 when it votes. Lockers with another max TTL
	// judge it by theirs.
	SitsOut time.Duration
	// Unrepaired reports a quorum node that has sat out and votes, but
	// whose fence counters the next attempt that hears from a majority
	// of the other nodes must repair before it counts.
	Unrepaired bool
	// Err is set when the server did not answer in time, or failed.
	Err error
}

// MaxMetadata is the largest metadata option.Metadata accepts, in bytes.
const MaxMetadata = 512

// Broken is what a forced release (ForceRelease) found and did: who
// held the key, and the token the break took, above every token handed out
// for the key before it, the old holder's included. Show Token to a fence
// (fence.Guard.Admit, fence.Store.Put) and the old holder's late writes
// are refused; the next holder's token is above it anyway.
type Broken struct {
	Key string
	// Held reports whether a lease held the key when it was broken: on
	// the server (single), or on a majority of the nodes that answered
	// (quorum).
	Held bool
	// Owner and Metadata are the old holder's (Info.Owner, Info.Metadata);
	// empty when not Held. The owner releases nothing any more.
	Owner, Metadata string
	// Was is the old holder's token when Held; otherwise the last token
	// handed out for the key, 0 if none.
	Was fence.Token
	// Token is the break's own token: above Was and every earlier token.
	Token fence.Token
}
