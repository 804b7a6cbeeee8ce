package claims_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
)

// warmQueue runs every script of q once, so that a dropped reply is never
// a NOSCRIPT answer, and leaves the queue empty.
func warmQueue(t *testing.T, q *claims.Queue) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, q.Add(ctx, "warm-1", "warm-2"))
	c1, c2 := claim(t, q), claim(t, q)
	require.NoError(t, c1.Lease().Extend(ctx, time.Minute))
	require.NoError(t, c1.Complete(ctx))
	require.NoError(t, c2.Retry(ctx))
	require.NoError(t, claim(t, q).Complete(ctx))
	_, err := q.Stats(ctx)
	require.NoError(t, err)
}

// item reads the queue's entry for id: "token count owner".
func item(t *testing.T, srv *redistest.Server, q *claims.Queue, id string) string {
	t.Helper()
	v, err := srv.Do("HGET", claims.Base(q), id)
	if err != nil && v != "" {
		t.Fatalf("HGET %s: %v", id, err)
	}
	return v
}

// TestClientRetriesLostReply: a user's go-redis client with its default
// options (MaxRetries 3) sends a script again when its reply is lost. An
// Add run again adds nothing more, a claim run again by its owner returns
// the same item and token (not a second item), and a Complete or a Retry
// run again after it succeeded succeeds.
func TestClientRetriesLostReply(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	n := d.GoRedis(t)
	q := newQueue(t, n, "retries", option.TTL(10*time.Second))
	warmQueue(t, q)
	ctx := t.Context()

	d.Drop(0, 1)
	require.NoError(t, q.Add(ctx, "a", "b"), "Add, its reply lost once")
	if s := stats(t, q); s != (claims.Stats{Pending: 2}) {
		t.Fatalf("after Add of a and b run twice: %+v; want 2 pending", s)
	}

	d.Drop(0, 1)
	a, err := q.Claim(ctx)
	require.NoError(t, err, "Claim, its reply lost once")
	if a.ID() != "a" || a.Attempt() != 1 {
		t.Fatalf("Claim run twice: %q at attempt %d; want a at attempt 1", a.ID(), a.Attempt())
	}
	if s := stats(t, q); s != (claims.Stats{Pending: 1, Claimed: 1}) {
		t.Fatalf("after one claim run twice: %+v; want b pending, a claimed", s)
	}
	if got, want := item(t, srv, q, "a"), a.Token().String()+" 1 "+a.Lease().Owner(); got != want {
		t.Fatalf("a's entry %q; want %q", got, want)
	}

	d.Drop(0, 1)
	require.NoError(t, a.Complete(ctx), "Complete, its reply lost once")
	if done, err := srv.Do("GET", claims.Base(q)+":done:a"); err != nil || done != a.Token().String() {
		t.Fatalf("a's done record %q, %v; want its token %s", done, err, a.Token())
	}

	b := claim(t, q)
	d.Drop(0, 1)
	require.NoError(t, b.Retry(ctx), "Retry, its reply lost once")
	if s := stats(t, q); s != (claims.Stats{Pending: 1}) {
		t.Fatalf("after a completed and b returned: %+v; want b pending", s)
	}
	if d.Dropped() != 4 {
		t.Fatalf("%d replies dropped; want 4", d.Dropped())
	}
}

// TestLostClaimReplyAbandoned: a client that does not send a script again
// (go-redis with MaxRetries -1, valkey-go) reports a claim whose reply was
// lost as failed; the claim, which ran, is given up: its item goes back to
// the front of the queue, and nobody holds it.
func TestLostClaimReplyAbandoned(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			d := redistest.StartDropper(t, srv.Addr())
			n := noRetryNode(t, client, d.Addr())
			q := newQueue(t, n, "lost")
			warmQueue(t, q)
			ctx := t.Context()
			// The abandon script loaded, behind no dropper.
			_, err := redistest.NodeFor(t, "go-redis", srv.Addr()).Eval(ctx, claims.AbandonScript, []string{claims.Base(q)}, "warm", "1")
			require.NoError(t, err)

			require.NoError(t, q.Add(ctx, "x", "y"))
			d.Drop(0, 1)
			if c, err := q.Claim(ctx); err == nil {
				t.Fatalf("Claim with its reply lost: granted %q; want the lost connection's error", c.ID())
			}
			if s := stats(t, q); s != (claims.Stats{Pending: 2}) {
				t.Fatalf("after the lost claim: %+v; want x and y pending", s)
			}
			if v := strings.SplitN(item(t, srv, q, "x"), " ", 3); len(v) != 3 || v[1] != "1" {
				t.Fatalf("x's entry %q; want the lost claim counted", v)
			}
			c := claim(t, q)
			if c.ID() != "x" || c.Attempt() != 2 {
				t.Fatalf("claim after the abandon: %q at attempt %d; want x, back at the front, at attempt 2", c.ID(), c.Attempt())
			}
			require.NoError(t, c.Complete(ctx))
		})
	}
}

// noRetryNode returns a Node on client for addr that never sends a
// command again by itself.
func noRetryNode(t *testing.T, client, addr string) node.Node {
	t.Helper()
	if client == "go-redis" {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		n := goredis.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			_ = c.Close()
		})
		return n
	}
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	n := valkeygo.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		c.Close()
	})
	return n
}
