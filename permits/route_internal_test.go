package permits

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
)

// TestRouter: the waiters of one Semaphore on a name share its
// subscription, and a grant published on the name's channel reaches the
// waiter it names and no other; a message that names nobody reaches them
// all; a waiter that drew a new owner is found under it; the last to
// leave ends the route and its subscription.
func TestRouter(t *testing.T) {
	srv := redistest.Start(t)
	for _, cl := range redistest.Nodes(t, srv.Addr()) {
		t.Run(cl.Name, func(t *testing.T) {
			s, err := New(cl.Node)
			require.NoError(t, err)
			ctx := t.Context()
			const channel = "dlock:permits:{route}:released"
			ownerA, ownerB := engine.NewOwner()+" meta", engine.NewOwner()
			a := s.route.enter(channel, ownerA)
			require.Nil(t, s.route.enterListening(channel, ownerB), "entered a route nobody subscribed")
			require.NotNil(t, s.route.listen(ctx, a, 2*time.Second), "the first waiter's subscription")
			b := s.route.enterListening(channel, ownerB)
			require.NotNil(t, b, "a waiter entering a subscribed route")

			// One message at a time: the Node's subscription coalesces
			// what its reader has not taken yet.
			forA, forB := ownerA[:32]+" 7 0", ownerB+" 8 1"
			srv.MustDo(t, "PUBLISH", channel, forA)
			require.Equal(t, forA, <-a.c, "a's message")
			require.Zero(t, pending(s, b), "b's inbox after a's message")
			srv.MustDo(t, "PUBLISH", channel, forB)
			require.Equal(t, forB, <-b.c, "b's message")
			require.Zero(t, pending(s, a), "a's inbox after b's message")

			srv.MustDo(t, "PUBLISH", channel, "all")
			require.Equal(t, "all", <-a.c)
			require.Equal(t, "all", <-b.c)

			ownerC := engine.NewOwner()
			s.route.rename(a, ownerC)
			srv.MustDo(t, "PUBLISH", channel, ownerA[:32]+" 9 2")
			srv.MustDo(t, "PUBLISH", channel, forB)
			require.Equal(t, forB, <-b.c)
			require.Zero(t, pending(s, a), "a's inbox after a message for its old owner")
			srv.MustDo(t, "PUBLISH", channel, ownerC+" 10 2")
			require.Equal(t, ownerC+" 10 2", <-a.c, "the message for a's new owner")

			s.route.leave(a)
			s.route.leave(b)
			require.Empty(t, s.route.routes, "routes after the last waiter left")
			require.Nil(t, s.route.enterListening(channel, ownerB), "entered a route whose waiters all left")
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

// TestReleaseHands: a release hands a permit it frees to a waiter of the
// same Semaphore from its reply, for the waiter's whole TTL (no message,
// no extension to follow), and publishes one for a waiter elsewhere,
// bounded by that waiter's ticket.
func TestReleaseHands(t *testing.T) {
	srv := redistest.Start(t)
	for _, cl := range redistest.Nodes(t, srv.Addr()) {
		t.Run(cl.Name, func(t *testing.T) {
			s, err := New(cl.Node)
			require.NoError(t, err)
			ctx := t.Context()
			name := "hands-" + cl.Name
			var held [2]*lease.Lease
			for i := range held {
				held[i], err = s.TryAcquire(ctx, name, 2)
				require.NoError(t, err)
			}
			// Waiters queued by hand, with a minute's TTL and a 2 s ticket:
			// one of another Semaphore, then one of this one, on its route
			// and never reading it.
			far, near := engine.NewOwner(), engine.NewOwner()+" meta"
			in := s.route.enter(hashKey(name)+":released", near)
			defer s.route.leave(in)
			for _, w := range []struct{ owner, sem string }{{far, "0123456789abcdef"}, {near, s.id}} {
				_, err := cl.Node.Eval(ctx, scripts.Claim, []string{hashKey(name)}, w.owner, "2", "60000", "86460000", "2000", w.sem)
				require.NoError(t, err)
			}
			// granted returns the grant of owner's permit, as a message
			// names it, and how long it runs after its grant, ms.
			granted := func(owner string) (string, int64) {
				grant := srv.MustDo(t, "HGET", hashKey(name)+":s", owner)
				token, _, _ := strings.Cut(grant, " ")
				tk, err := strconv.ParseInt(token, 10, 64)
				require.NoError(t, err, "the waiter's token")
				end, err := strconv.ParseInt(srv.MustDo(t, "ZSCORE", hashKey(name)+":h", owner), 10, 64)
				require.NoError(t, err, "the end of the waiter's permit")
				return owner[:32] + " " + grant, end - tk/1000
			}

			require.NoError(t, held[0].Release(ctx))
			_, runs := granted(far)
			require.LessOrEqual(t, runs, int64(2000), "ms the permit published runs")
			require.Empty(t, in.c, "grants handed to this Semaphore's waiter")

			require.NoError(t, held[1].Release(ctx))
			grant, runs := granted(near)
			require.Equal(t, int64(60000), runs, "ms the permit handed runs")
			require.Len(t, in.c, 1, "grants handed to this Semaphore's waiter")
			require.Equal(t, "+"+grant, <-in.c, "the grant handed: owner token slot")
		})
	}
}
