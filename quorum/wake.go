package quorum

import (
	"context"
	"slices"
	"sync"
	"time"
)

// waker turns releases published on any node into signals on one channel.
type waker struct {
	done   chan struct{}
	cancel context.CancelFunc
}

// subscribe listens on channel on every node, calling signal with the
// node's index and each message, until stop. Each node subscribes in the background, bounded by a
// few node timeouts for leases of ttl, so a hung node holds up no attempt:
// its wake joins once its subscription is confirmed. The goroutines are
// counted in the Locker's WaitGroup; the caller must hold an operation.
// Once a majority is subscribed (or every node has answered), it signals
// wake once: a release published before then may have been missed, and
// after it, every release reaches a subscribed node, since a lease holds a
// majority.
func (lk *Locker) subscribe(channel string, ttl time.Duration, wake chan<- string, signal func(i int, msg string)) *waker {
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
			case wake <- "":
			default:
			}
		}
	}
	for i, nd := range lk.nodes {
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
				case msg := <-sig:
					signal(i, msg)
				}
			}
		})
	}
	return w
}

// stop ends the subscriptions, those still under way included, in the
// background (Close waits for them).
func (w *waker) stop() {
	w.cancel()
	close(w.done)
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
		case first.wake <- "":
		default:
		}
	}
}
