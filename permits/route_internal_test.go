package permits

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestRouter: the waiters of one Semaphore on a name share its
// subscription, and a grant published on the name's channel reaches the
// waiter it names and no other; a message that names nobody reaches them
// all; a waiter that drew a new owner is found under it; the last to
// leave ends the route, after which a waiter that will not subscribe
// finds none to join.
func TestRouter(t *testing.T) {
	srv := redistest.Start(t)
	for _, cl := range redistest.Nodes(t, srv.Addr()) {
		t.Run(cl.Name, func(t *testing.T) {
			s, err := New(cl.Node)
			require.NoError(t, err)
			ctx := t.Context()
			const channel = "dlock:permits:{route}:released"
			ownerA, ownerB := acquire.NewOwner()+" meta", acquire.NewOwner()
			require.Nil(t, s.route.join(ctx, channel, ownerB, time.Second, false), "joined a route nobody subscribed")
			a := s.route.join(ctx, channel, ownerA, 2*time.Second, true)
			require.NotNil(t, a.wake(), "the first waiter's subscription")
			b := s.route.join(ctx, channel, ownerB, 2*time.Second, false)
			require.NotNil(t, b.wake(), "a waiter joining a subscribed route")

			// One message at a time: the Node's subscription coalesces
			// what its reader has not taken yet.
			forA, forB := ownerA[:32]+" 7 0", ownerB+" 8 1"
			srv.MustDo(t, "PUBLISH", channel, forA)
			require.Equal(t, forA, <-a.wake(), "a's message")
			require.Zero(t, pending(s, b), "b's inbox after a's message")
			srv.MustDo(t, "PUBLISH", channel, forB)
			require.Equal(t, forB, <-b.wake(), "b's message")
			require.Zero(t, pending(s, a), "a's inbox after b's message")

			srv.MustDo(t, "PUBLISH", channel, "all")
			require.Equal(t, "all", <-a.wake())
			require.Equal(t, "all", <-b.wake())

			ownerC := acquire.NewOwner()
			s.route.rename(a, ownerC)
			srv.MustDo(t, "PUBLISH", channel, ownerA[:32]+" 9 2")
			srv.MustDo(t, "PUBLISH", channel, forB)
			require.Equal(t, forB, <-b.wake())
			require.Zero(t, pending(s, a), "a's inbox after a message for its old owner")
			srv.MustDo(t, "PUBLISH", channel, ownerC+" 10 2")
			require.Equal(t, ownerC+" 10 2", <-a.wake(), "the message for a's new owner")

			s.route.leave(a)
			s.route.leave(b)
			require.Empty(t, s.route.routes, "routes after the last waiter left")
			require.Nil(t, s.route.join(ctx, channel, ownerB, time.Second, false), "joined an ended route")
		})
	}
}

// pending is how many messages wait in in, once the route has put
// down what it was delivering (it holds the router's lock meanwhile).
func pending(s *Semaphore, in *inbox) int {
	s.route.mu.Lock()
	defer s.route.mu.Unlock()
	return len(in.c)
}

// TestReleaseHands: a release hands the permit it frees to a waiter of
// the same Semaphore from its own reply, the grant's message aside (the
// route here never reads its channel, as when the message is lost).
func TestReleaseHands(t *testing.T) {
	srv := redistest.Start(t)
	for _, cl := range redistest.Nodes(t, srv.Addr()) {
		t.Run(cl.Name, func(t *testing.T) {
			s, err := New(cl.Node)
			require.NoError(t, err)
			ctx := t.Context()
			name := "hands-" + cl.Name
			l, err := s.TryAcquire(ctx, name, 1)
			require.NoError(t, err)
			waiter := acquire.NewOwner()
			r, err := cl.Node.Eval(ctx, claimScript, []string{hashKey(name)}, waiter, "1", "30000", "86430000", "2000")
			require.NoError(t, err)
			require.Equal(t, int64(1), r.Int(1), "the waiter's place in the queue")

			channel := hashKey(name) + ":released"
			ready := make(chan struct{})
			close(ready)
			deaf := &route{channel: channel, waiters: 1, inboxes: map[string]*inbox{}, ready: ready, msgs: make(chan string)}
			in := &inbox{r: deaf, id: waiter, c: make(chan string, 1)}
			deaf.inboxes[waiter] = in
			s.route.routes = map[string]*route{channel: deaf}

			require.NoError(t, l.Release(ctx))
			require.Len(t, in.c, 1, "grants handed to the waiter")
			held := srv.MustDo(t, "HGET", hashKey(name)+":s", waiter)
			require.Equal(t, waiter+" "+held, <-in.c, "the grant handed: owner token slot")
		})
	}
}
