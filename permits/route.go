package permits

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine"
)

// router hands each grant to the one waiter of this Semaphore it is for.
// A release of this Semaphore replies the grants it makes to them, and
// the releaser hands each over (hand); a grant made elsewhere (another
// process's release, a claim that found a permit expired) is published
// on the name's channel, which the name's waiters here share one
// subscription to, read by one goroutine that hands each grant to the
// waiter it names. With one subscription per waiter, each grant woke
// every waiter of the process, which read it and slept again, and that
// was most of the cost of a queue of waiters. A name's route, with its
// subscription and goroutine, lasts while the name has a waiter here;
// the last to leave ends it.
type router struct {
	s      *Semaphore
	mu     sync.Mutex
	routes map[string]*route // by channel
}

// route is one name's channel while it has waiters here; its fields are
// under router.mu.
type route struct {
	channel string
	waiters int               // entered and not left
	inboxes map[string]*inbox // by owner ID (see ownerID)
	sub     *subscription     // nil until a waiter listens, and after one failed
}

// subscription is a route's subscription to its channel. Its fields are
// written before ready is closed, and only read after.
type subscription struct {
	ready chan struct{} // closed once the subscription was made or failed
	msgs  <-chan string // nil when it failed
	stop  func()
	quit  chan struct{} // closed by the route's last waiter to leave
	done  chan struct{} // closed when the reading goroutine ends
}

// inbox is one waiter's place on a route: the grants for it, the latest
// pending.
type inbox struct {
	r  *route
	id string
	c  chan string
}

// ownerID is the part of an owner a grant's message names: its random ID.
func ownerID(owner string) string { return owner[:min(len(owner), engine.OwnerIDLen)] }

// enter puts the waiter owner on channel's route, without a call to the
// server: from then on, the grants of this Semaphore's releases reach it,
// and so do published ones once the route is subscribed (see listen).
func (rt *router) enter(channel, owner string) *inbox {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.enterLocked(channel, owner)
}

func (rt *router) enterLocked(channel, owner string) *inbox {
	r := rt.routes[channel]
	if r == nil {
		r = &route{channel: channel, inboxes: map[string]*inbox{}}
		if rt.routes == nil {
			rt.routes = map[string]*route{}
		}
		rt.routes[channel] = r
	}
	in := &inbox{r: r, id: ownerID(owner), c: make(chan string, 1)}
	r.waiters++
	r.inboxes[in.id] = in
	return in
}

// enterListening enters owner on channel's route (see enter) only when
// the route is subscribed already, so that every grant made from then on
// reaches it; it returns nil otherwise.
func (rt *router) enterListening(channel, owner string) *inbox {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r := rt.routes[channel]
	if r == nil || r.sub == nil {
		return nil
	}
	select {
	case <-r.sub.ready:
		if r.sub.msgs == nil {
			return nil
		}
	default:
		return nil
	}
	return rt.enterLocked(channel, owner)
}

// listen subscribes in's route, unless a waiter did already; it waits for
// one that subscribes meanwhile, or until ctx ends. A subscription is
// given up after half of life, the waiter's ticket lifetime: a hung server
// must not hold the waiter longer. It returns the channel of in's grants,
// or nil when the route has no subscription: the waiter then polls at its
// retry pace, and the next waiter to listen tries again.
func (rt *router) listen(ctx context.Context, in *inbox, life time.Duration) <-chan string {
	r := in.r
	rt.mu.Lock()
	sub := r.sub
	first := sub == nil
	if first {
		sub = &subscription{ready: make(chan struct{})}
		r.sub = sub
	}
	rt.mu.Unlock()
	if first {
		sub.msgs, sub.stop = rt.s.kit.Subscribe(ctx, r.channel, life)
		if sub.msgs != nil {
			sub.quit, sub.done = make(chan struct{}), make(chan struct{})
			go rt.read(r, sub)
		} else {
			rt.mu.Lock()
			r.sub = nil
			rt.mu.Unlock()
		}
		close(sub.ready)
	} else {
		select {
		case <-sub.ready:
		case <-ctx.Done():
			return nil
		}
	}
	if sub.msgs == nil {
		return nil
	}
	return in.c
}

// rename files in under owner's ID, when the waiter drew a new owner.
func (rt *router) rename(in *inbox, owner string) {
	id := ownerID(owner)
	if in.id == id {
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
// subscription and waits for its goroutine to end; a waiter that enters
// meanwhile starts a route of its own.
func (rt *router) leave(in *inbox) {
	r := in.r
	rt.mu.Lock()
	if r.inboxes[in.id] == in {
		delete(r.inboxes, in.id)
	}
	r.waiters--
	last := r.waiters == 0
	if last {
		delete(rt.routes, r.channel)
	}
	sub := r.sub
	rt.mu.Unlock()
	if !last || sub == nil {
		return
	}
	<-sub.ready // the waiter that subscribes leaves only after
	if sub.msgs != nil {
		sub.stop()
		close(sub.quit)
		<-sub.done
	}
}

// read hands each message of sub, r's subscription, to the waiter it names: a grant,
// "owner token slot", to its owner's inbox when the owner waits here,
// which nobody else's is; any other message to every inbox. A message
// that finds one pending takes its place: either wakes the waiter, whose
// next attempt asks the server.
func (rt *router) read(r *route, sub *subscription) {
	defer close(sub.done)
	for {
		var msg string
		select {
		case <-sub.quit:
			return
		case msg = <-sub.msgs:
		}
		rt.mu.Lock()
		if id, _, ok := strings.Cut(msg, " "); ok {
			if in := r.inboxes[id]; in != nil {
				in.put(msg)
			}
		} else {
			for _, in := range r.inboxes {
				in.put(msg)
			}
		}
		rt.mu.Unlock()
	}
}

// hand gives a grant that a release of this Semaphore made on channel,
// and replied rather than published, to owner, its waiter, marked "+" for
// heed: the permit runs the waiter's whole TTL (see serve() in
// lua/state.lua). It reports false when owner waits here no longer (it
// entered before it queued, and leaves after its last call to the
// server): the permit is the caller's to give back.
func (rt *router) hand(channel, owner, token, slot string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r := rt.routes[channel]
	if r == nil {
		return false
	}
	in := r.inboxes[ownerID(owner)]
	if in == nil {
		return false
	}
	in.put("+" + in.id + " " + token + " " + slot)
	return true
}

// put leaves msg in in's channel without blocking: only read and hand,
// under router.mu, send to it.
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

// heed reads a message of the release channel for a waiter: a grant,
// "owner token slot" (see serve() in lua/state.lua), calls for an attempt
// now only when it is this waiter's, whose permit it keeps for the
// attempt when its token is above the attempts of the waiter's latest
// refusal (a lower one was granted before that refusal ran, and heard
// late: it has ended, and the attempt asks the server); any other message
// does too. A grant a release of this
// Semaphore handed over from its reply comes marked "+" (see router.hand),
// which no message of the channel reaches a waiter with.
func (c *claim) heed(msg string) bool {
	msg, whole := strings.CutPrefix(msg, "+")
	owner, rest, ok := strings.Cut(msg, " ")
	if !ok {
		return true
	}
	if owner != c.args[0][:min(len(c.args[0]), engine.OwnerIDLen)] {
		return false
	}
	token, slot, ok := strings.Cut(rest, " ")
	t, err1 := strconv.ParseUint(token, 10, 64)
	n, err2 := strconv.Atoi(slot)
	// A token no script grants, or a slot below 0, hands nothing over:
	// the attempt that follows asks the server.
	if ok && err1 == nil && err2 == nil && t <= engine.MaxToken && n >= 0 && fence.Token(t) > c.seen {
		c.handed, c.handedSlot, c.handedWhole = fence.Token(t), n, whole
	}
	return true
}
