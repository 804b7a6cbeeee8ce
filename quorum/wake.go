package quorum

import (
	"context"
	"slices"
	"sync"
	"time"
)

// listening is a key's subscriptions on every node, shared by the
// Locker's waiters of that key: a release's message is read once, however
// many of them wait (each waiter subscribing on its own had every message
// delivered, and parsed, once per waiter). It lives while a waiter of the
// key does; the first starts it, the last stops it.
type listening struct {
	waiters []*waiter
	done    chan struct{} // closed by stop
	cancel  context.CancelFunc
	ready   bool // a majority subscribed, or every node answered
}

// listen makes w one of key's waiters that releases on channel wake,
// subscribing on every node when w is the key's first. A waiter that
// joins once the subscriptions are ready is woken at once, as the first
// is when they become ready: a release published before it listened may
// have gone unheard. The caller holds an operation (see subscribe).
func (lk *Locker) listen(key, channel string, ttl time.Duration, w *waiter) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	if lk.listening == nil {
		lk.listening = make(map[string]*listening)
	}
	l := lk.listening[key]
	if l == nil {
		l = &listening{done: make(chan struct{})}
		lk.listening[key] = l
		lk.subscribe(l, channel, ttl)
	}
	l.waiters = append(l.waiters, w)
	if l.ready {
		signal(w.wake)
	}
}

// unlisten takes w off key's waiters, and ends the key's subscriptions
// when it was the last, in the background (Close waits for them).
func (lk *Locker) unlisten(key string, w *waiter) {
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	l := lk.listening[key]
	if l == nil {
		return
	}
	l.waiters = slices.DeleteFunc(l.waiters, func(x *waiter) bool { return x == w })
	if len(l.waiters) == 0 {
		delete(lk.listening, key)
		l.cancel()
		close(l.done)
	}
}

// subscribe listens on channel on every node for l, passing each message
// to heard with the node's index, until l is stopped. Each node
// subscribes in the background, bounded by a few node timeouts for
// leases of ttl, so a hung node holds up no attempt: its messages join
// once its subscription is confirmed. The goroutines are counted in the
// Locker's WaitGroup; the caller holds an operation, and lk.wmu. Once a
// majority is subscribed (or every node has answered), l is ready and its
// waiters are woken once: a release published before then may have been
// missed, and after it, every release reaches a subscribed node, since a
// lease holds a majority.
func (lk *Locker) subscribe(l *listening, channel string, ttl time.Duration) {
	ctx, cancel := context.WithCancel(lk.closing)
	l.cancel = cancel
	n, q := len(lk.nodes), lk.Quorum()
	var (
		mu                 sync.Mutex
		confirmed, settled int
		fired              bool
	)
	settle := func(ok bool) {
		mu.Lock()
		settled++
		if ok {
			confirmed++
		}
		fire := !fired && (confirmed == q || settled == n)
		fired = fired || fire
		mu.Unlock()
		if fire {
			lk.wmu.Lock()
			defer lk.wmu.Unlock()
			l.ready = true
			for _, w := range l.waiters {
				signal(w.wake)
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
				case <-l.done:
					return
				case msg := <-sig:
					lk.heard(l, i, msg)
				}
			}
		})
	}
}

// signal wakes the waiter listening on wake, unless a wake is pending.
func signal(wake chan<- string) {
	select {
	case wake <- "":
	default:
	}
}

// wakeFirst wakes the earliest of l's waiters, the only one of them the
// queues can grant the lock to next: waking all of them would send every
// one on a five-node attempt bound to be refused. (When the head waits in
// another process, that process wakes it.) The caller holds lk.wmu.
func wakeFirst(l *listening) {
	var first *waiter
	for _, w := range l.waiters {
		if first == nil || w.at < first.at || w.at == first.at && w.id < first.id {
			first = w
		}
	}
	if first != nil {
		signal(first.wake)
	}
}
