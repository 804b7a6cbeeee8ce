package permits

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
)

// router hands the grants published on a name's channel to the one
// waiter of this Semaphore each names. Its waiters on a name share one
// subscription, and a grant wakes only its own waiter: with one
// subscription per waiter, each grant woke every waiter of the process,
// which read it and slept again, and that was most of the cost of a
// queue of waiters. The subscription, and the goroutine that reads it,
// last while the name has a waiter here; the last to leave ends both.
type router struct {
	s      *Semaphore
	mu     sync.Mutex
	routes map[string]*route // by channel
}

// route is one name's channel while it has waiters here.
type route struct {
	channel string
	waiters int               // joined and not left; under router.mu
	inboxes map[string]*inbox // by owner ID (see ownerID); under router.mu
	ready   chan struct{}     // closed once the subscription was made or failed
	// Written before ready is closed, read only after.
	msgs <-chan string // nil when the subscription failed
	stop func()
	quit chan struct{} // closed by the last waiter to leave
	done chan struct{} // closed when the reading goroutine ends
}

// inbox is one waiter's place on a route: the messages meant for it,
// the latest pending.
type inbox struct {
	r  *route
	id string
	c  chan string
}

// ownerID is the part of an owner a grant's message names: its random ID.
func ownerID(owner string) string { return owner[:min(len(owner), acquire.OwnerIDLen)] }

// join puts the waiter owner on channel's route. With wait false it does
// so only when the route is subscribed already, so that any grant made
// after join returns is heard of; it returns nil otherwise. With wait
// true it subscribes first when the route is new (for at most half of
// life, the waiter's ticket lifetime, as a hung server must not hold it
// longer), and waits while another waiter does; the inbox it returns is
// then deaf (see wake) when the subscription failed. ctx ending while it
// waits returns nil.
func (rt *router) join(ctx context.Context, channel, owner string, life time.Duration, wait bool) *inbox {
	rt.mu.Lock()
	r := rt.routes[channel]
	first := r == nil
	if first {
		if !wait {
			rt.mu.Unlock()
			return nil
		}
		r = &route{channel: channel, inboxes: map[string]*inbox{}, ready: make(chan struct{})}
		if rt.routes == nil {
			rt.routes = map[string]*route{}
		}
		rt.routes[channel] = r
	} else if !wait && !r.live() {
		rt.mu.Unlock()
		return nil
	}
	in := &inbox{r: r, id: ownerID(owner), c: make(chan string, 1)}
	r.waiters++
	r.inboxes[in.id] = in
	rt.mu.Unlock()
	if first {
		r.msgs, r.stop = rt.s.kit.Subscribe(ctx, channel, life)
		if r.msgs != nil {
			r.quit, r.done = make(chan struct{}), make(chan struct{})
			go rt.read(r)
		} else {
			// The waiters on r poll; those that join later try again.
			rt.mu.Lock()
			if rt.routes[channel] == r {
				delete(rt.routes, channel)
			}
			rt.mu.Unlock()
		}
		close(r.ready)
		return in
	}
	select {
	case <-r.ready:
		return in
	case <-ctx.Done():
		rt.leave(in)
		return nil
	}
}

// live reports whether r's subscription was made.
func (r *route) live() bool {
	select {
	case <-r.ready:
		return r.msgs != nil
	default:
		return false
	}
}

// wake returns the channel of the messages for in, nil when it hears
// none (no inbox, or its route's subscription failed): the waiter then
// polls at its retry pace.
func (in *inbox) wake() <-chan string {
	if in == nil || in.r.msgs == nil {
		return nil
	}
	return in.c
}

// rename files in under owner's ID, when the waiter drew a new owner.
func (rt *router) rename(in *inbox, owner string) {
	id := ownerID(owner)
	if in == nil || in.id == id {
		return
	}
	rt.mu.Lock()
	if in.r.inboxes[in.id] == in {
		delete(in.r.inboxes, in.id)
	}
	in.id = id
	in.r.inboxes[id] = in
	rt.mu.Unlock()
}

// leave takes in off its route. The last waiter to leave a route ends its
// subscription and waits for its goroutine to end; a waiter that joins
// meanwhile starts a route of its own.
func (rt *router) leave(in *inbox) {
	if in == nil {
		return
	}
	r := in.r
	rt.mu.Lock()
	if r.inboxes[in.id] == in {
		delete(r.inboxes, in.id)
	}
	r.waiters--
	last := r.waiters == 0
	if last && rt.routes[r.channel] == r {
		delete(rt.routes, r.channel)
	}
	rt.mu.Unlock()
	if !last {
		return
	}
	<-r.ready // the first waiter, which subscribes, leaves only after
	if r.msgs != nil {
		r.stop()
		close(r.quit)
		<-r.done
	}
}

// read hands each message on r's channel to the waiter it names: a grant,
// "owner token slot", to its owner's inbox when the owner waits here,
// which nobody else's is; any other message to every inbox. A message
// that finds one pending takes its place: either wakes the waiter, whose
// next attempt asks the server.
func (rt *router) read(r *route) {
	defer close(r.done)
	for {
		var msg string
		select {
		case <-r.quit:
			return
		case msg = <-r.msgs:
		}
		rt.mu.Lock()
		r.deliver(msg)
		rt.mu.Unlock()
	}
}

// hand gives a grant a release of this Semaphore made on channel to its
// waiter, when it waits here. The grant's message comes too, later, and
// can be lost (messages coalesce; see node.Node.Subscribe): a waiter that
// missed it would hold its permit unused until its next attempt.
func (rt *router) hand(channel, grant string) {
	rt.mu.Lock()
	if r := rt.routes[channel]; r != nil {
		r.deliver(grant)
	}
	rt.mu.Unlock()
}

// deliver puts msg in the inboxes it is for; the caller holds router.mu.
func (r *route) deliver(msg string) {
	if id, _, ok := strings.Cut(msg, " "); ok {
		if in := r.inboxes[id]; in != nil {
			in.put(msg)
		}
		return
	}
	for _, in := range r.inboxes {
		in.put(msg)
	}
}

// put leaves msg in in's channel without blocking: only deliver, under
// router.mu, sends to it.
func (in *inbox) put(msg string) {
	select {
	case in.c <- msg:
		return
	default:
	}
	select {
	case <-in.c:
	default:
	}
	in.c <- msg
}
