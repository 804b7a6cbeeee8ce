package single_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// TestFailoverFenced is the seed's failover race: A claims on a master, the
// claim never reaches the replica, the master dies, the replica is
// promoted, B claims there. Without option.Replicas both hold the lock (the
// promoted replica has no record of A's claim), but B's token is above A's
// even though A's bump of the counter was lost with the master: the
// counter is floored at the server's clock. So the fence refuses A's write
// after B's. With option.Replicas(1, 100ms), A's claim is refused outright.
func TestFailoverFenced(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			t.Run("async", func(t *testing.T) { failover(t, client, false) })
			t.Run("Replicas", func(t *testing.T) { failover(t, client, true) })
		})
	}
}

func failover(t *testing.T, client string, wait bool) {
	const ttl = 5 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	master := redistest.Start(t)
	replica := redistest.Start(t, redistest.WithReplicaOf(master))
	require.NoError(t, replica.WaitSynced(ctx))
	var opts []option.Option
	if wait {
		opts = append(opts, option.Replicas(1, 100*time.Millisecond))
	}
	lkA := newLocker(t, redistest.NodeFor(t, client, master.Addr()), append(opts, option.TTL(ttl))...)
	lkB := newLocker(t, redistest.NodeFor(t, client, replica.Addr()), option.TTL(ttl))
	// The protected resource lives on a server of its own, which survives.
	store := fence.NewStore(redistest.NodeFor(t, client, redistest.Start(t).Addr()))
	var guard fence.Guard

	// A history that did replicate. A fresh replica is streamed to only
	// after its first ACK, so this also waits for replication to run.
	var l0 *lease.Lease
	for {
		l, err := lkA.TryAcquire(ctx, "k")
		if err == nil {
			l0 = l
			break
		}
		// option.Replicas refuses claims until the replica acknowledges.
		if !errors.Is(err, single.ErrReplicas) || ctx.Err() != nil {
			t.Fatalf("first claim: %v", err)
		}
	}
	require.NoError(t, l0.Release(ctx))
	for field(t, replica, "k", "attempts") != l0.Token().String() || field(t, replica, "k", "owner") != "" {
		if ctx.Err() != nil {
			t.Fatal("the first claim and its release never reached the replica")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The replica stops applying the replication stream: A's claim is
	// known to the master alone.
	_, err := replica.Do("CLIENT", "PAUSE", "10000", "WRITE")
	require.NoError(t, err)
	a, errA := lkA.TryAcquire(ctx, "k")
	if a != nil {
		require.NoError(t, guard.Admit("res", a.Token()), "guard, A's first write")
		require.NoError(t, store.Put(ctx, "res", "a1", a.Token()), "store, A's first write")
	}
	master.Kill()
	// Promoted before unpausing, so the buffered claim is dropped.
	_, err = replica.Do("REPLICAOF", "NO", "ONE")
	require.NoError(t, err)
	_, err = replica.Do("CLIENT", "UNPAUSE")
	require.NoError(t, err)
	if got := field(t, replica, "k", "attempts"); got != l0.Token().String() {
		t.Fatalf("attempts on the promoted replica = %s; want %s, the last replicated claim's", got, l0.Token())
	}

	b, err := lkB.TryAcquire(ctx, "k")
	require.NoError(t, err, "B on the promoted replica")
	if b.Token() <= l0.Token() {
		t.Fatalf("B's token %d; want above the replicated %d", b.Token(), l0.Token())
	}

	if wait {
		var re *single.ReplicaError
		if !errors.As(errA, &re) || re.Acked != 0 || re.Wanted != 1 || a != nil {
			t.Fatalf("A's acquire = %v; want a *ReplicaError with 0 of 1 acks", errA)
		}
		return
	}
	if errA != nil {
		t.Fatalf("A's acquire on the master: %v", errA)
	}
	t.Logf("A token %d, B token %d (the promoted replica last saw %d)", a.Token(), b.Token(), l0.Token())
	if a.TTL() <= 0 || b.TTL() <= 0 {
		t.Fatalf("A's TTL %v, B's %v; want both held: the double grant the race makes", a.TTL(), b.TTL())
	}
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d, A's %d; want B's above A's: floored at the server clock", b.Token(), a.Token())
	}
	require.NoError(t, guard.Admit("res", b.Token()), "guard, B's write")
	require.NoError(t, store.Put(ctx, "res", "b1", b.Token()), "store, B's write")
	if err := guard.Admit("res", a.Token()); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("guard, A's write after B's: %v; want ErrStale", err)
	}
	if err := store.Put(ctx, "res", "a2", a.Token()); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("store, A's write after B's: %v; want ErrStale", err)
	}
	if v, tok, _, err := store.Get(ctx, "res"); err != nil || v != "b1" || tok != b.Token() {
		t.Fatalf("store holds %q@%d, %v; want %q@%d", v, tok, err, "b1", b.Token())
	}
	require.NoError(t, b.Release(ctx), "B's release")
}

// TestReplicasHandoffWaits: under option.Replicas, a lock a release hands to
// a waiter is returned only once a replica has it, as a claimed one is.
// The release that writes the handoff is not waited on, so the waiter
// claims the lock again (finding it its own) and waits for that. B queues
// behind A; the replica stops applying the stream for 1.5 s; A releases.
// B's Acquire must not return before the replica holds B as the owner.
func TestReplicasHandoffWaits(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			master := redistest.Start(t)
			replica := redistest.Start(t, redistest.WithReplicaOf(master))
			require.NoError(t, replica.WaitSynced(ctx))
			opts := []option.Option{option.TTL(5 * time.Second), option.Replicas(1, 100*time.Millisecond)}
			lkA := newLocker(t, redistest.NodeFor(t, client, master.Addr()), opts...)
			lkB := newLocker(t, redistest.NodeFor(t, client, master.Addr()), opts...)
			var a *lease.Lease
			for a == nil {
				l, err := lkA.TryAcquire(ctx, "k")
				if err != nil && (!errors.Is(err, single.ErrReplicas) || ctx.Err() != nil) {
					t.Fatalf("A: %v", err)
				}
				a = l
			}
			type result struct {
				l   *lease.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				l, err := lkB.Acquire(ctx, "k")
				got <- result{l, err}
			}()
			for field(t, master, "k", "waiting") != "1" {
				if ctx.Err() != nil {
					t.Fatal("B never queued")
				}
				time.Sleep(5 * time.Millisecond)
			}
			_, err := replica.Do("CLIENT", "PAUSE", "1500", "WRITE")
			require.NoError(t, err)
			require.NoError(t, a.Release(ctx))
			r := <-got
			require.NoError(t, r.err, "B")
			if owner := field(t, replica, "k", "owner"); owner != r.l.Owner() {
				t.Fatalf("B's Acquire returned while the replica's owner is %q; want B's %q", owner, r.l.Owner())
			}
			require.NoError(t, r.l.Release(ctx))
		})
	}
}
