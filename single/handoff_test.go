package single_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// ticket queues owner by hand, as a waiter's refused claim would, with a
// ticket of life ms and a TTL of ttl ms.
func ticket(t *testing.T, srv *redistest.Server, key, owner string, life, ttl int64) {
	t.Helper()
	h := "dlock:{" + key + "}"
	tk := strconv.FormatInt(serverMs(t, srv)+life, 10) + " " + strconv.FormatInt(ttl, 10) + " 60000"
	place := strconv.Itoa(queued(t, srv, key) + 1)
	require.NoError(t, srv.LockHash(h)) // a queue stands beside the hash only
	for _, cmd := range [][]string{
		{"ZADD", h + ":q", place, owner},
		{"HSET", h + ":qx", owner, tk},
		{"HINCRBY", h, "waiting", "1"},
	} {
		_, err := srv.Do(cmd...)
		require.NoError(t, err, "%v", cmd)
	}
}

// queueBehind takes key for a minute, then starts a waiter for it on a
// Locker whose claims cn counts, with a retry delay of a minute: only a
// message wakes it. The waiter's lease, or nil, comes on got.
func queueBehind(ctx context.Context, t *testing.T, n node.Node, key string) (holder *lease.Lease, lk *single.Locker, cn *redistest.Counter, got chan *lease.Lease) {
	t.Helper()
	holder, err := newLocker(t, n).TryAcquire(ctx, key, option.TTL(time.Minute))
	require.NoError(t, err)
	cn = &redistest.Counter{Node: n, Script: single.ClaimScript}
	lk = newLocker(t, cn, option.TTL(time.Minute))
	got = make(chan *lease.Lease, 1)
	go func() {
		l, err := lk.Acquire(ctx, key, option.Retry(time.Minute, time.Minute))
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		got <- l
	}()
	return holder, lk, cn, got
}

// handed waits for the waiter's lease on got, and fails t when none comes
// before ctx ends.
func handed(ctx context.Context, t *testing.T, got <-chan *lease.Lease) *lease.Lease {
	t.Helper()
	select {
	case l := <-got:
		require.NotNil(t, l)
		return l
	case <-ctx.Done():
		t.Fatal("the waiter was not handed the lock")
		return nil
	}
}

// TestHandoffOneHop: a release hands the lock to the waiting head, which
// learns of it from the release's message, with no claim of its own, and
// holds a lease fenced above the one released, extended to its TTL.
func TestHandoffOneHop(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		const key = "hop"
		holder, lk, cn, got := queueBehind(ctx, t, n, key)
		waitQueued(t, srv, key, 1)
		cn.Await(t, 2, nil) // the first claim, then one more once subscribed
		require.NoError(t, holder.Release(ctx))
		l := handed(ctx, t, got)
		defer l.Release(ctx)
		if c := cn.Runs(); c != 2 {
			t.Errorf("%d claims; want 2: the handoff needs none", c)
		}
		if l.Token() <= holder.Token() {
			t.Errorf("handed token %d; want above the released %d", l.Token(), holder.Token())
		}
		info, err := lk.Inspect(ctx, key)
		require.NoError(t, err)
		if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() {
			t.Errorf("Inspect = %+v; want held by the handed lease, token %d", info, l.Token())
		}
		noQueue(t, srv, key)
		// The lease is extended to its TTL at once, in the background.
		deadline := time.Now().Add(5 * time.Second)
		for l.TTL() < 50*time.Second && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if l.TTL() < 50*time.Second {
			t.Errorf("handed lease TTL %v; want about a minute once extended", l.TTL())
		}
	})
}

// TestHandoffHeardLate: a message handing the lock to a waiter whose
// token is not above the attempts of the waiter's latest refusal is a
// grant made before that refusal, heard late; its lease has ended, and
// the waiter asks the server rather than take it. The two messages here
// (a token far below, and the holder's own) each cost the waiter one
// claim, which counts that it heard them; the real handoff after them is
// taken.
func TestHandoffHeardLate(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		const key = "late"
		holder, lk, cn, got := queueBehind(ctx, t, n, key)
		cn.Await(t, 2, nil) // refused, subscribed, refused again
		owner, err := srv.Do("ZRANGE", single.HashKey(key)+":q", "0", "0")
		require.NoError(t, err)
		id := owner[:32]
		for i, token := range []string{"5", strconv.FormatUint(uint64(holder.Token()), 10)} {
			_, err := srv.Do("PUBLISH", single.HashKey(key)+":released", id+" "+token)
			require.NoError(t, err)
			// Each message heard costs a claim.
			cn.Await(t, int32(3+i), func() {
				select {
				case l := <-got:
					t.Fatalf("a handoff of token %s taken while the holder holds the lock: lease %d", token, l.Token())
				default:
				}
			})
		}
		require.NoError(t, holder.Release(ctx))
		l := handed(ctx, t, got)
		defer l.Release(ctx)
		info, err := lk.Inspect(ctx, key)
		require.NoError(t, err)
		if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() || l.Token() <= holder.Token() {
			t.Errorf("Inspect = %+v; want held by the handed lease, token %d above %d", info, l.Token(), holder.Token())
		}
	})
}

// TestHandoffBoundedByTicket: a release hands the lock to a head that
// never hears of it (it died): the grant lasts until the head's ticket
// deadline, not its TTL, and the next waiter gets the lock then. A dead
// head whose ticket had lapsed is skipped at once.
func TestHandoffBoundedByTicket(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		const key = "bounded"
		lk := newLocker(t, n)
		holder, err := lk.TryAcquire(ctx, key)
		require.NoError(t, err)
		ticket(t, srv, key, "lapsed0123456789abcdef0123456789 meta", -1, 60_000)
		ticket(t, srv, key, "ghost0123456789abcdef0123456789a meta", 600, 60_000)
		require.NoError(t, holder.Release(ctx))
		info, err := lk.Inspect(ctx, key)
		require.NoError(t, err)
		if queued(t, srv, key) != 0 {
			t.Errorf("%d tickets left; want none: the lapsed head dropped, the ghost handed the lock", queued(t, srv, key))
		}
		if info.Owner != "ghost0123456789abcdef0123456789a meta" || info.TTL > 600*time.Millisecond || info.Token <= holder.Token() {
			t.Fatalf("after the release: %+v; want the live ghost holding for its ticket's 600 ms at most, token above %d", info, holder.Token())
		}
		start := serverMs(t, srv)
		l, err := lk.Acquire(ctx, key)
		require.NoError(t, err, "Acquire behind a ghost handed the lock")
		defer l.Release(ctx)
		if waited := serverMs(t, srv) - start; waited > 5_000 {
			t.Errorf("granted %d ms after the handoff to a ghost; want within its ticket's 600 ms and a retry", waited)
		}
		if l.Token() <= info.Token {
			t.Errorf("token %d; want above the ghost's %d", l.Token(), info.Token)
		}
	})
}

// TestHandoffMissedMessage: a waiter handed the lock that missed the
// message learns of its grant from its next claim, which runs the lease a
// TTL from then; one that gives up instead (leave) hands the lock on. A
// release run again after its handoff still succeeds.
func TestHandoffMissedMessage(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n)
		h := single.HashKey("missed")
		const a, b = "aaaa0123456789abcdef0123456789ab", "bbbb0123456789abcdef0123456789ab"
		holder, err := lk.TryAcquire(ctx, "missed")
		require.NoError(t, err)
		ticket(t, srv, "missed", a, 2_000, 60_000)
		ticket(t, srv, "missed", b, 2_000, 60_000)
		require.NoError(t, holder.Release(ctx))
		tok := field(t, srv, "missed", "attempts")
		// The release run again, as a retrying client would.
		r, err := n.Eval(ctx, single.ReleaseScript, []string{h}, holder.Owner(), strconv.FormatUint(uint64(holder.Token()), 10))
		require.NoError(t, err, "release run again after its handoff")
		require.EqualValues(t, 1, r.Int(0))
		// a's claim, as its client sends it: owner, TTL, the hash's life, ticket life.
		r, err = n.Eval(ctx, single.ClaimScript, []string{h}, a, "60000", "120000", "2000")
		require.NoError(t, err)
		if len(r) != 1 || strconv.FormatInt(r.Int(0), 10) != tok {
			t.Fatalf("claim of the head handed the lock: %v; want its grant, token %s", r, tok)
		}
		pttl, err := srv.Do("EVAL", "return tonumber(redis.call('HGET', KEYS[1], 'until')) - tonumber(redis.call('TIME')[1]) * 1000", "1", h)
		require.NoError(t, err)
		if ms, _ := strconv.Atoi(pttl); ms < 55_000 {
			t.Errorf("a's lease runs %s ms more after its claim; want its TTL, 60000, less a second", pttl)
		}
		// a gives up: the lock goes on to b.
		_, err = n.Eval(ctx, single.LeaveScript, []string{h}, a)
		require.NoError(t, err)
		if o := field(t, srv, "missed", "owner"); o != b {
			t.Fatalf("after the holder left, owner %q; want the next waiter %s", o, b)
		}
		_, err = n.Eval(ctx, single.LeaveScript, []string{h}, b)
		require.NoError(t, err)
		if o := field(t, srv, "missed", "owner"); o != "" {
			t.Fatalf("after the last waiter left, owner %q; want none", o)
		}
		noQueue(t, srv, "missed")
	})
}
