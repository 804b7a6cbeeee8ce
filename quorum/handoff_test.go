package quorum_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// votesIn counts the Vote events among ev.
func votesIn(ev []observe.Event) int {
	n := 0
	for _, e := range ev {
		if e.Kind == observe.Vote {
			n++
		}
	}
	return n
}

// TestHandoff: a lease's release hands the lock to the waiter at the head
// of the queue on every node it frees, and the waiter holds it without a
// vote of its own after the release: its lease's owner holds the lock on
// every node, with tokens the released lease's token + 1, which the grants
// committed (no commit round either), and its release frees the key. With the guard on and off, with and without
// tokens, each on a fresh key so that every shape of grant is read.
func TestHandoff(t *testing.T) {
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5)
		for _, mode := range []struct {
			name string
			opts []option.Option
		}{
			// The guard sits a node out for its max TTL after its first
			// use: a short one, waited out below.
			{"guarded", []option.Option{option.TTL(time.Second), option.MaxTTL(time.Second)}},
			{"durable", []option.Option{option.DurableNodes(true)}},
			{"no-tokens", []option.Option{option.Tokens(false)}},
		} {
			t.Run(mode.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				key := "handoff-" + mode.name
				opts := append([]option.Option{option.TTL(5 * time.Second)}, mode.opts...)
				holder := newLocker(t, nodesOn(t, srvs, c), opts...)
				require.Eventually(t, func() bool {
					l, err := holder.TryAcquire(ctx, key)
					if err == nil {
						require.NoError(t, l.Release(ctx))
					}
					return err == nil
				}, 5*time.Second, 50*time.Millisecond, "the nodes sit their first use out")
				rec := &events.Recorder{}
				waiter := newLocker(t, nodesOn(t, srvs, c), append(opts, option.Observer(rec))...)
				held := holdEverywhere(t, holder, srvs, key)

				got := make(chan *lease.Lease, 1)
				go func() {
					// A retry longer than the test: only a release moves it.
					l, err := waiter.Acquire(ctx, key, option.Retry(time.Minute, time.Minute))
					if err != nil {
						t.Errorf("Acquire: %v", err)
					}
					got <- l
				}()
				waitQueued(t, srvs, key, 1)
				// Once subscribed on a majority, the waiter tries once more
				// (a release may have gone unheard before): the count of
				// its votes settles after that attempt.
				for _, s := range srvs {
					s.WaitSubscribed(t, "dlock:{"+key+"}:released")
				}
				before := votesIn(rec.Events())
				for settled := 0; settled < 3; settled++ {
					time.Sleep(20 * time.Millisecond)
					if n := votesIn(rec.Events()); n != before {
						before, settled = n, 0
					}
				}
				require.NoError(t, held.Release(ctx), "Release")
				l := <-got
				require.NotNil(t, l, "Acquire")
				if after := votesIn(rec.Events()); after != before {
					t.Errorf("the waiter voted %d times after the release; want none: the release hands the lock over", after-before)
				}
				// The lease holds a majority. On a node its attempt's vote
				// did not reach before the release, the lock went to the
				// attempt the ticket named there, an earlier one of the
				// same waiter: that and nothing else.
				lock := "dlock:{" + key + "}:lock"
				mine := 0
				for i, s := range srvs {
					owner := do(t, s, "GET", lock)
					if owner == l.Owner() {
						mine++
						continue
					}
					waiting := do(t, s, "ZRANGE", "dlock:{"+key+"}:queue", "0", "0")
					ticket := strings.Fields(do(t, s, "HGET", "dlock:{"+key+"}:queue:deadlines", waiting))
					if len(ticket) != 4 || owner != ticket[3] {
						t.Errorf("server %d: lock held by %q, ticket %q; want the waiter's lease %q or the attempt its ticket names", i, owner, ticket, l.Owner())
					}
				}
				if mine < len(srvs)/2+1 {
					t.Errorf("the waiter's lease holds %d of %d nodes; want a majority", mine, len(srvs))
				}
				if held.Token() != 0 {
					// The grants committed the next token, the released
					// one's + 1: a commit round would have drawn one at
					// the servers' clock, far above it.
					if l.Token() != held.Token()+1 {
						t.Errorf("token %d after %d; want %d, committed in the grants", l.Token(), held.Token(), held.Token()+1)
					}
					for i, s := range srvs {
						if do(t, s, "GET", lock) == l.Owner() {
							if c := do(t, s, "GET", "dlock:{"+key+"}:fence"); c != strconv.FormatUint(uint64(l.Token()), 10) {
								t.Errorf("server %d holds the lease with counter %s; want its token %d", i, c, l.Token())
							}
						}
					}
				}
				require.NoError(t, l.Release(ctx), "Release of the handed lease")
				// The release returns on a majority; the rest land after.
				if left := eventuallyNoLock(t, srvs, key); len(left) > 0 {
					t.Errorf("servers %v hold the lock after the handed lease's release; want none", left)
				}
				next, err := holder.TryAcquire(ctx, key)
				require.NoError(t, err, "TryAcquire after the handed lease's release")
				require.NoError(t, next.Release(ctx))
			})
		}
	})
}

// TestHandoffKept: a failed attempt's release leaves a lock a release
// handed to the attempt (the waiter's ticket names it: its vote there was
// refused), which the waiter may count on, and deletes one its own vote
// set (the ticket names another attempt, or there is none).
func TestHandoffKept(t *testing.T) {
	srvs := redistest.StartN(t, 1)
	n := nodesOn(t, srvs, "go-redis")[0]
	ctx := t.Context()
	const key, waiter, owner = "kept", "w1", "a2"
	lock, deadlines := "dlock:{"+key+"}:lock", "dlock:{"+key+"}:queue:deadlines"
	deadline := strconv.FormatInt(serverMs(t, srvs[0])+60_000, 10)
	for _, c := range []struct {
		name, ticket string
		kept         bool
	}{
		{"handed", deadline + " 5000 2 0 " + owner, true},
		{"another attempt's ticket", deadline + " 5000 1 0 a1", false},
		{"no ticket", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			do(t, srvs[0], "DEL", deadlines)
			if c.ticket != "" {
				do(t, srvs[0], "HSET", deadlines, waiter, c.ticket)
			}
			do(t, srvs[0], "SET", lock, owner, "PX", "60000")
			r, err := quorum.ReleaseFailed(ctx, n, key, owner, waiter)
			require.NoError(t, err, "release")
			got := do(t, srvs[0], "GET", lock)
			if kept := got == owner; kept != c.kept {
				t.Errorf("lock %q after the release (reply %d); kept %v, want %v", got, r, kept, c.kept)
			}
		})
	}
}

// TestHandoffGhost: a lock a release handed to an earlier attempt of a
// waiter, which the waiter's later attempt's vote did not reach in time,
// does not outlive its waiter's lease. The later attempt's vote takes it,
// even behind a waiter that joined the queue ahead since; and the lease's
// release deletes it where no vote of the lease's took it.
func TestHandoffGhost(t *testing.T) {
	srvs := redistest.StartN(t, 1)
	n := nodesOn(t, srvs, "go-redis")[0]
	ctx := t.Context()
	const key, waiter, ahead = "ghost", "w1", "w0"
	lock, queue, deadlines := "dlock:{"+key+"}:lock", "dlock:{"+key+"}:queue", "dlock:{"+key+"}:queue:deadlines"
	deadline := strconv.FormatInt(serverMs(t, srvs[0])+60_000, 10)
	setup := func(t *testing.T) {
		do(t, srvs[0], "DEL", lock, queue, deadlines)
		do(t, srvs[0], "ZADD", queue, "1", ahead, "2", waiter)
		do(t, srvs[0], "HSET", deadlines, ahead, deadline+" 5000 1 0 b1", waiter, deadline+" 5000 1 0 a1")
		do(t, srvs[0], "SET", lock, "a1", "PX", "60000")
	}
	t.Run("a later vote takes it", func(t *testing.T) {
		setup(t)
		st, err := quorum.VoteAttempt(ctx, n, "a2", waiter, "2", 2, key)
		require.NoError(t, err, "vote")
		if got := do(t, srvs[0], "GET", lock); st != quorum.StatusSet || got != "a2" {
			t.Errorf("attempt 2's vote: status %d, lock %q; want %d and %q", st, got, quorum.StatusSet, "a2")
		}
	})
	t.Run("an earlier vote does not", func(t *testing.T) {
		setup(t)
		do(t, srvs[0], "HSET", deadlines, waiter, deadline+" 5000 3 0 a3")
		do(t, srvs[0], "SET", lock, "a3", "PX", "60000")
		st, err := quorum.VoteAttempt(ctx, n, "a2", waiter, "2", 2, key)
		require.NoError(t, err, "vote")
		if got := do(t, srvs[0], "GET", lock); st == quorum.StatusSet || got != "a3" {
			t.Errorf("attempt 2's late vote: status %d, lock %q; want refused and %q", st, got, "a3")
		}
	})
	t.Run("the lease's release deletes it", func(t *testing.T) {
		setup(t)
		_, err := quorum.ReleaseLease(ctx, n, key, "a2", waiter)
		require.NoError(t, err, "release")
		if got := do(t, srvs[0], "GET", lock); got != "" {
			t.Errorf("lock %q after the lease's release; want none", got)
		}
		if got := do(t, srvs[0], "HGET", deadlines, waiter); got != "" {
			t.Errorf("ticket %q after the lease's release; want none", got)
		}
	})
}

// TestListeningShared: a Locker's waiters of one key share one
// subscription per node, each is handed the lock in turn, and the
// subscriptions end with the last of them, on the Locker and on every
// server.
func TestListeningShared(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const key, waiters = "shared", 4
	channel := "dlock:{" + key + "}:released"
	holder := newLocker(t, nodesOn(t, srvs, "go-redis"), option.DurableNodes(true))
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.DurableNodes(true))
	held := holdEverywhere(t, holder, srvs, key)
	got := make(chan error, waiters)
	for range waiters {
		go func() {
			l, err := lk.Acquire(ctx, key, option.Retry(time.Minute, time.Minute))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
	}
	waitQueued(t, srvs, key, waiters)
	require.Eventually(t, func() bool { n, _ := quorum.Listening(lk, key); return n == waiters },
		5*time.Second, 10*time.Millisecond, "every waiter listening")
	if _, keys := quorum.Listening(lk, key); keys != 1 {
		t.Errorf("the Locker listens on %d keys; want 1", keys)
	}
	for i, s := range srvs {
		s.WaitSubscribed(t, channel)
		if n := do(t, s, "PUBSUB", "NUMSUB", channel); n != channel+"\n1" {
			t.Errorf("server %d: PUBSUB NUMSUB %q; want one subscriber", i, n)
		}
	}
	require.NoError(t, held.Release(ctx), "Release")
	for range waiters {
		require.NoError(t, <-got, "Acquire and Release")
	}
	if n, keys := quorum.Listening(lk, key); n != 0 || keys != 0 {
		t.Errorf("after the last waiter: %d waiters listening on %d keys; want none", n, keys)
	}
	for i, s := range srvs {
		require.Eventually(t, func() bool { return do(t, s, "PUBSUB", "NUMSUB", channel) == channel+"\n0" },
			2*time.Second, 10*time.Millisecond, "server %d: the subscription ends", i)
	}
}

// TestHandoffCarry: a later attempt's vote that takes over a lock a
// release handed, with its token, to an earlier attempt of the waiter
// carries that token (an eighth value) while the node's counter is still
// it, and takes the ticket's place, so that a failed attempt's release
// leaves the lock and the next attempt takes it over in turn.
func TestHandoffCarry(t *testing.T) {
	srvs := redistest.StartN(t, 1)
	n := nodesOn(t, srvs, "go-redis")[0]
	ctx := t.Context()
	const key, waiter, granted = "carry", "w1", "1796000000000001"
	lock, fence, queue, deadlines := "dlock:{"+key+"}:lock", "dlock:{"+key+"}:fence", "dlock:{"+key+"}:queue", "dlock:{"+key+"}:queue:deadlines"
	deadline := strconv.FormatInt(serverMs(t, srvs[0])+60_000, 10)
	setup := func(t *testing.T, counter string) {
		do(t, srvs[0], "DEL", lock, fence, queue, deadlines)
		do(t, srvs[0], "ZADD", queue, "2", waiter)
		do(t, srvs[0], "HSET", deadlines, waiter, deadline+" 5000 1 "+granted+" a1")
		do(t, srvs[0], "SET", lock, "a1", "PX", "60000")
		do(t, srvs[0], "SET", fence, counter)
	}
	vote := func(t *testing.T, owner string, attempt int) node.Reply {
		t.Helper()
		r, err := quorum.VoteAttemptTokens(ctx, n, owner, waiter, "2", attempt, key)
		require.NoError(t, err, "vote of %s", owner)
		if got := do(t, srvs[0], "GET", lock); r.Int(0) != quorum.StatusSet || got != owner {
			t.Fatalf("%s's vote: status %d, lock %q; want %d and %q", owner, r.Int(0), got, quorum.StatusSet, owner)
		}
		return r
	}
	ticketOf := func(t *testing.T) string {
		_, rest, _ := strings.Cut(do(t, srvs[0], "HGET", deadlines, waiter), " ")
		return rest
	}
	t.Run("carried", func(t *testing.T) {
		setup(t, granted)
		if r := vote(t, "a2", 2); len(r) != 8 || strconv.FormatInt(r.Int(7), 10) != granted {
			t.Fatalf("reply %v; want 8 values, the last %s", r, granted)
		}
		if got, want := ticketOf(t), "60000 2 "+granted+" a2"; got != want {
			t.Errorf("ticket %q after the take-over; want %q", got, want)
		}
		// The attempt fails: its release leaves the lock to the next.
		_, err := quorum.ReleaseFailed(ctx, n, key, "a2", waiter)
		require.NoError(t, err, "release")
		if r := vote(t, "a3", 3); len(r) != 8 || strconv.FormatInt(r.Int(7), 10) != granted {
			t.Fatalf("the next attempt's reply %v; want 8 values, the last %s", r, granted)
		}
	})
	t.Run("not over a counter moved since", func(t *testing.T) {
		setup(t, "1796000000000009")
		if r := vote(t, "a2", 2); len(r) != 7 {
			t.Fatalf("reply %v; want 7 values", r)
		}
		if got, want := ticketOf(t), "60000 2 0 a2"; got != want {
			t.Errorf("ticket %q after the take-over; want %q", got, want)
		}
	})
}

// TestHandFast: a release that finds nobody waiting (lua/fast_hand.lua)
// deletes the owner's lock, and its waiter's ticket when the lease was a
// waiter's, and says '1' on the key's channel; one that
// finds a waiter's ticket in the queue still hands the lock to the
// attempt it names, with the grant on the channel; one of an owner that
// does not hold the lock leaves it, and says nothing.
func TestHandFast(t *testing.T) {
	srvs := redistest.StartN(t, 1)
	n := nodesOn(t, srvs, "go-redis")[0]
	ctx := t.Context()
	const key, waiter = "fast", "w1"
	lock, queue, deadlines := "dlock:{"+key+"}:lock", "dlock:{"+key+"}:queue", "dlock:{"+key+"}:queue:deadlines"
	channel := "dlock:{" + key + "}:released"
	msgs, stop, err := n.Subscribe(ctx, channel)
	require.NoError(t, err, "Subscribe")
	defer stop()
	// freed releases a1's lock, granted to waiter (empty for none), and
	// checks the reply is 1, none of keys is left and the channel says '1'.
	freed := func(t *testing.T, waiter string, keys ...string) {
		t.Helper()
		r, err := quorum.Hand(ctx, n, key, "a1", channel, waiter, "")
		require.NoError(t, err, "release")
		if got := do(t, srvs[0], append([]string{"EXISTS"}, keys...)...); r != 1 || got != "0" {
			t.Fatalf("reply %d, keys left of %q: %s; want 1 and none", r, keys, got)
		}
		if m := redistest.Receive(t, msgs); m != "1" {
			t.Errorf("message %q; want \"1\"", m)
		}
	}
	t.Run("nobody waits", func(t *testing.T) {
		do(t, srvs[0], "SET", lock, "a1", "PX", "60000")
		freed(t, "", lock)
	})
	t.Run("the lease's waiter, nobody queued", func(t *testing.T) {
		// An Acquire granted at its first vote: its waiter has no place in
		// the queue; a stray entry in the deadlines goes with the lease.
		do(t, srvs[0], "SET", lock, "a1", "PX", "60000")
		do(t, srvs[0], "HSET", deadlines, waiter, "1 5000 1 0 a1")
		freed(t, waiter, lock, deadlines)
	})
	t.Run("a waiter queued", func(t *testing.T) {
		deadline := strconv.FormatInt(serverMs(t, srvs[0])+60_000, 10)
		do(t, srvs[0], "SET", lock, "a1", "PX", "60000")
		do(t, srvs[0], "ZADD", queue, "2", waiter)
		do(t, srvs[0], "HSET", deadlines, waiter, deadline+" 5000 1 0 b1")
		r, err := quorum.Hand(ctx, n, key, "a1", channel, "", "")
		require.NoError(t, err, "release")
		if got := do(t, srvs[0], "GET", lock); r != 1 || got != "b1" {
			t.Fatalf("reply %d, lock %q; want 1 and the waiter's attempt b1", r, got)
		}
		if m := redistest.Receive(t, msgs); !strings.HasPrefix(m, "b1|") {
			t.Errorf("message %q; want the grant to b1", m)
		}
		do(t, srvs[0], "DEL", lock, queue, deadlines)
	})
	t.Run("not the owner's", func(t *testing.T) {
		do(t, srvs[0], "SET", lock, "a2", "PX", "60000")
		r, err := quorum.Hand(ctx, n, key, "a1", channel, "", "")
		require.NoError(t, err, "release")
		if got := do(t, srvs[0], "GET", lock); r != 0 || got != "a2" {
			t.Fatalf("reply %d, lock %q; want 0 and a2's", r, got)
		}
		select {
		case m := <-msgs:
			t.Errorf("message %q after a release that freed nothing", m)
		case <-time.After(200 * time.Millisecond):
		}
	})
}
