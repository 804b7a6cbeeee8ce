package quorum

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

// backend is the Locker's side of one lease.
type backend struct {
	lk  *Locker
	ks  *keySet
	ttl time.Duration // the TTL the lease was granted with

	waiter string        // the Acquire whose ticket the lease's release takes off the queue; empty for TryAcquire
	unsure []atomic.Bool // the attempt's (see ballot)
	token  string        // the lease's token, as the commit sent it; empty without tokens

	set    *lockSet // the locks of a lease on several; nil for one (ks)
	tokens []string // a set's tokens by lock, as the commit sent them; nil without tokens
}

// name names the lease's lock(s) in errors: its key, or the keys of a set
// joined by commas.
func (b *backend) name() string {
	if b.set != nil {
		return b.set.name
	}
	return b.ks.key
}

// Extend sets the lock's expiry to ttl on every node where the lease still
// holds it (for a set, every lock of it: a node that lost one counts as
// refusing); a node where it expired is not revived. It needs a majority
// within the validity measured from the moment the request was sent.
// Extension counts every node where this owner holds the lock, whatever its
// epoch: holding the lock there is a fact, and a node that lost its data
// lost this lock too, so it refuses.
func (b *backend) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	lk := b.lk
	if err := lk.cfg.CheckTTL(ttl); err != nil {
		return time.Time{}, err
	}
	if err := lk.begin(); err != nil {
		return time.Time{}, err
	}
	defer lk.wg.Done()
	q := lk.Quorum()
	n := len(lk.nodes)
	t1 := time.Now()
	req := request{script: extendScript, args: []string{l.Owner(), strconv.FormatInt(ttl.Milliseconds(), 10), lk.keep(ttl), "1"}}
	if b.set == nil {
		req.keys, req.args = b.ks.extend(lk.cfg.Tokens), req.args[:3]
	} else {
		req.script, req.keys = extendSetScript, b.set.extend
		if lk.cfg.Tokens {
			req.args[3] = "2"
		}
	}
	r := lk.fanout(ctx, lk.all(), lk.nodeTimeout(ttl), req, nil)
	answers := make([]NodeAnswer, n)
	for i := range answers {
		answers[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
	}
	got, refused := 0, 0
	for pending := n; pending > 0 && got < q && refused <= n-q; pending-- {
		a := r.next()
		ans, ok := agreed(lk.names[a.i], a)
		answers[a.i] = ans
		switch {
		case ok:
			got++
		case ans.Kind == KindHeld:
			refused++
		}
	}
	r.abandon()
	t2 := time.Now()
	if got < q {
		return time.Time{}, newError("extend", b.name(), got, q, answers, nil)
	}
	validity := engine.Validity(ttl, t2.Sub(t1), settings.Drift(ttl, lk.cfg.Drift))
	if validity <= 0 {
		return time.Time{}, newError("extend", b.name(), got, q, answers,
			noValidity(t2.Sub(t1), ttl))
	}
	return t2.Add(validity), nil
}

// Release deletes the lock on every node where this owner still holds it,
// and wakes the next waiter. It succeeds when at least one node held it,
// or, with tokens and the lease still valid, when a majority had it last:
// the lock gone and its counter still at the lease's token, as a release
// run again after its reply was lost finds it. One such node is not
// enough: a break (ForceRelease) commits its token on a majority only,
// and leaves the others so. It returns once a majority has released it or
// every node answered: the rest of the release goes on in the background,
// and Close waits for it.
func (b *backend) Release(ctx context.Context, l *lease.Lease) error {
	lk := b.lk
	if err := lk.begin(); err != nil {
		return err
	}
	defer lk.wg.Done()
	rel := releasing{owner: l.Owner(), unsure: b.unsure, waiter: b.waiter, ttl: b.ttl, publish: true}
	if l.Fenced() && l.TTL() > 0 {
		// While the lease is valid, its lock cannot have expired on the
		// servers: one found gone with its counter still at the token was
		// released by this very release, run again by the client. Past
		// that, it may have expired, which is no release.
		rel.token, rel.tokens = b.token, b.tokens
	}
	var (
		answers           []NodeAnswer
		released, deleted int
	)
	q := lk.Quorum()
	if b.set == nil {
		answers, released, deleted = lk.releaseAll(b.ks, rel, nil, q, nil)
	} else {
		answers, released, deleted = lk.releaseSet(b.set, rel, nil, q, nil)
	}
	if deleted > 0 || released >= q {
		return nil
	}
	for i := range answers {
		if answers[i].Kind == KindOK {
			// Gone with its counter at the token, on too few nodes to
			// tell a release run again from a break.
			answers[i].Kind = KindHeld
		}
	}
	return newError("release", b.name(), 0, q, answers, nil)
}
