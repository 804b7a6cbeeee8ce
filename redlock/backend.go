package redlock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
)

// backend is the Locker's side of one lease.
type backend struct {
	lk  *Locker
	ks  *keySet
	ttl time.Duration // the TTL the lease was granted with

	waiter string        // the Acquire whose ticket the lease's release takes off the queue; empty for TryAcquire
	unsure []atomic.Bool // the attempt's (see attemptState)
}

// Extend sets the lock's expiry to ttl on every node where the lease still
// holds it; a node where it expired is not revived. It needs a majority
// within the validity measured from the moment the request was sent.
// Extension counts every node where this owner holds the lock, whatever its
// epoch: holding the lock there is a fact, and a node that lost its data
// lost this lock too, so it refuses.
func (b *backend) Extend(ctx context.Context, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	lk := b.lk
	if err := lk.checkTTL(ttl); err != nil {
		return time.Time{}, err
	}
	if err := lk.begin(); err != nil {
		return time.Time{}, err
	}
	defer lk.wg.Done()
	q := lk.Quorum()
	n := len(lk.nodes)
	t1 := time.Now()
	r := lk.fanout(ctx, lk.all(), lk.nodeTimeout(ttl), request{script: extendScript, keys: b.ks.extend(!lk.cfg.noTokens),
		args: []string{l.Owner(), strconv.FormatInt(ttl.Milliseconds(), 10), lk.keep(ttl)}}, nil)
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
		return time.Time{}, newQuorumError("extend", l.Key(), got, q, answers, nil)
	}
	validity := acquire.Validity(ttl, t2.Sub(t1), acquire.Drift(ttl, lk.cfg.drift))
	if validity <= 0 {
		return time.Time{}, newQuorumError("extend", l.Key(), got, q, answers,
			noValidity(t2.Sub(t1), ttl))
	}
	return t2.Add(validity), nil
}

// Release deletes the lock on every node where this owner still holds it,
// and wakes the next waiter. It succeeds when at least one node held it
// (or, with tokens and the lease still valid, had it last: the lock gone
// and its counter still at the lease's token, as a release run again
// after its reply was lost finds it), and returns once a majority has
// released it or every node answered: the rest of the release goes on in
// the background, and Close waits for it.
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
		rel.token = l.Token().String()
	}
	answers, released := lk.releaseAll(ctx, b.ks, rel, nil, lk.Quorum(), nil)
	if released > 0 {
		return nil
	}
	return newQuorumError("release", l.Key(), 0, lk.Quorum(), answers, nil)
}

// waker turns releases published on any node into signals on one channel.
type waker struct {
	done   chan struct{}
	cancel context.CancelFunc
}

// subscribe listens on channel on every node, calling signal on each
// message, until stop. Each node subscribes in the background, bounded by a
// few node timeouts for leases of ttl, so a hung node holds up no attempt:
// its wake joins once its subscription is confirmed. The goroutines are
// counted in the Locker's WaitGroup; the caller must hold an operation.
// Once a majority is subscribed (or every node has answered), it signals
// wake once: a release published before then may have been missed, and
// after it, every release reaches a subscribed node, since a lease holds a
// majority.
func (lk *Locker) subscribe(channel string, ttl time.Duration, wake chan<- struct{}, signal func()) *waker {
	ctx, cancel := context.WithCancel(lk.closing)
	w := &waker{done: make(chan struct{}), cancel: cancel}
	n, q := len(lk.nodes), lk.Quorum()
	var (
		mu                 sync.Mutex
		confirmed, settled int
		woken              bool
	)
	settle := func(ok bool) {
		mu.Lock()
		settled++
		if ok {
			confirmed++
		}
		fire := !woken && (confirmed == q || settled == n)
		woken = woken || fire
		mu.Unlock()
		if fire {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	for _, nd := range lk.nodes {
		lk.wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, lk.cleanupTimeout(ttl))
			sig, stop, err := nd.Subscribe(sctx, channel)
			cancel()
			settle(err == nil)
			if err != nil {
				return
			}
			defer stop()
			for {
				select {
				case <-w.done:
					return
				case <-sig:
					signal()
				}
			}
		})
	}
	return w
}

// enlist makes w one of key's waiters that releases wake.
func (lk *Locker) enlist(key string, w *waiter) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	if lk.waiting == nil {
		lk.waiting = make(map[string][]*waiter)
	}
	lk.waiting[key] = append(lk.waiting[key], w)
}

func (lk *Locker) delist(key string, w *waiter) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	ws := slices.DeleteFunc(lk.waiting[key], func(x *waiter) bool { return x == w })
	if len(ws) == 0 {
		delete(lk.waiting, key)
	} else {
		lk.waiting[key] = ws
	}
}

// wakeFirst wakes the earliest of key's waiters in this Locker, the only
// one of them the queues can grant the lock to next: waking all of them
// would send every one on a five-node attempt bound to be refused. (When
// the head waits in another process, that process wakes it.)
func (lk *Locker) wakeFirst(key string) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	var first *waiter
	for _, w := range lk.waiting[key] {
		if first == nil || w.at < first.at || w.at == first.at && w.id < first.id {
			first = w
		}
	}
	if first != nil {
		select {
		case first.wake <- struct{}{}:
		default:
		}
	}
}

// stop ends the subscriptions, those still under way included, in the
// background (Close waits for them).
func (w *waker) stop() {
	w.cancel()
	close(w.done)
}
