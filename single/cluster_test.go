package single_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// keyOn returns a lock key, starting with prefix, whose hash (and so every
// key of the lock) is served by master i.
func keyOn(t testing.TB, cl *redistest.Cluster, i int, prefix string) string {
	t.Helper()
	for n := 0; n < 1000; n++ {
		k := prefix + strconv.Itoa(n)
		if cl.Owner(cl.Slot("dlock:{"+k+"}")) == i {
			return k
		}
	}
	t.Fatalf("no key %s* on master %d", prefix, i)
	return ""
}

// clusterField reads one field of the lock's state on master i, in
// either of its forms (redistest.Server.LockField).
func clusterField(t testing.TB, cl *redistest.Cluster, i int, key, f string) string {
	t.Helper()
	v, err := cl.Servers()[i].LockField("dlock:{"+key+"}", f)
	if err != nil {
		t.Fatalf("lock field %s %s on master %d: %v", key, f, i, err)
	}
	return v
}

// subscribedOn waits until some master has a subscriber on channel and
// returns its index: a cluster node counts only its own subscribers.
func subscribedOn(t testing.TB, cl *redistest.Cluster, channel string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for i, s := range cl.Servers() {
			if out, err := s.Do("PUBSUB", "NUMSUB", channel); err == nil && out != channel+"\n0" {
				return i
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no subscriber on %s on any master", channel)
	return -1
}

// TestCluster runs the single strategy on a 3-master Redis Cluster through
// each client's cluster client. A lock's keys share the slot of its hash
// tag, so each lock lives on the one master serving that slot.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, c.Node), newLocker(t, c.Node)

			t.Run("AcquireExtendRelease", func(t *testing.T) {
				for i := range cl.Servers() {
					key := keyOn(t, cl, i, c.Name+"-basic-")
					l1, err := a.TryAcquire(ctx, key)
					if err != nil {
						t.Fatalf("master %d: TryAcquire: %v", i, err)
					}
					if got := clusterField(t, cl, i, key, "owner"); got != l1.Owner() {
						t.Fatalf("master %d: owner %q; want %q, on the master serving the slot", i, got, l1.Owner())
					}
					if _, err := b.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
						t.Fatalf("master %d: second TryAcquire: %v; want ErrTaken", i, err)
					}
					until := clusterField(t, cl, i, key, "until")
					if err := l1.Extend(ctx, time.Hour); err != nil {
						t.Fatalf("master %d: Extend: %v", i, err)
					}
					if got := clusterField(t, cl, i, key, "until"); got <= until {
						t.Fatalf("master %d: until %s after Extend; want past %s", i, got, until)
					}
					if err := l1.Release(ctx); err != nil {
						t.Fatalf("master %d: Release: %v", i, err)
					}
					l2, err := b.TryAcquire(ctx, key)
					if err != nil {
						t.Fatalf("master %d: TryAcquire after release: %v", i, err)
					}
					if l2.Token() <= l1.Token() {
						t.Fatalf("master %d: token %d after %d; want larger", i, l2.Token(), l1.Token())
					}
					if err := l1.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
						t.Fatalf("master %d: stale Release: %v; want ErrNotHeld", i, err)
					}
					if err := l2.Release(ctx); err != nil {
						t.Fatalf("master %d: Release: %v", i, err)
					}
				}
			})

			t.Run("Contention", func(t *testing.T) {
				key := c.Name + "-contended"
				var wins atomic.Int32
				var wg sync.WaitGroup
				start := make(chan struct{})
				won := make(chan *lease.Lease, 1)
				for range 50 {
					wg.Go(func() {
						<-start
						l, err := a.TryAcquire(ctx, key)
						switch {
						case err == nil:
							wins.Add(1)
							won <- l
						case !errors.Is(err, lease.ErrTaken):
							t.Errorf("TryAcquire: %v; want nil or ErrTaken", err)
						}
					})
				}
				close(start)
				wg.Wait()
				if got := wins.Load(); got != 1 {
					t.Fatalf("winners = %d; want 1", got)
				}
				_ = (<-won).Release(ctx)

				// Blocking waiters take turns: never two holders, tokens
				// rising in the order the lock was held.
				var (
					holders atomic.Int32
					mu      sync.Mutex
					last    fence.Token
				)
				for range 8 {
					wg.Go(func() {
						for range 10 {
							l, err := b.Acquire(ctx, key, option.TTL(5*time.Second))
							if err != nil {
								t.Errorf("Acquire: %v", err)
								return
							}
							if n := holders.Add(1); n != 1 {
								t.Errorf("%d holders at once", n)
							}
							mu.Lock()
							if l.Token() <= last {
								t.Errorf("token %d after %d; want rising", l.Token(), last)
							}
							last = l.Token()
							mu.Unlock()
							time.Sleep(200 * time.Microsecond)
							holders.Add(-1)
							if err := l.Release(ctx); err != nil {
								t.Errorf("Release: %v", err)
							}
						}
					})
				}
				wg.Wait()
			})

			t.Run("KeyShapes", func(t *testing.T) {
				// A lock of any key keeps all its keys (hash, gone-owner
				// record, queue) in one slot: braces anywhere, a leading
				// "}" (which makes "{KEY}" an empty hash tag), binary.
				for _, shape := range []string{"}", "}x", "}}", "}{", "{}", "{", "a{}b", "x}y", "{x}", "%7D", "\x00\xff}\n"} {
					shapeRoundTrip(t, cl, a, b, shape+"-"+c.Name)
					shapeRoundTrip(t, cl, a, b, c.Name+"-"+shape)
				}
			})

			t.Run("AcquireWokenByRelease", func(t *testing.T) {
				// One lock per master: the waiters' subscription sits on
				// one master, so at least two of the releases are heard
				// only because a cluster PUBLISH reaches every node.
				for i := range cl.Servers() {
					key := keyOn(t, cl, i, c.Name+"-wake-")
					held, err := a.TryAcquire(ctx, key)
					require.NoError(t, err)
					got := make(chan error, 1)
					var next *lease.Lease
					go func() {
						// A slow retry, and a holder with 30 s left: only the
						// published release can wake it soon.
						var err error
						next, err = b.Acquire(ctx, key, option.Retry(10*time.Second, 10*time.Second))
						got <- err
					}()
					sub := subscribedOn(t, cl, "dlock:{"+key+"}:released")
					t0 := time.Now()
					require.NoError(t, held.Release(ctx))
					var handoff time.Duration
					select {
					case err := <-got:
						handoff = time.Since(t0)
						if err != nil {
							t.Fatalf("Acquire: %v", err)
						}
					case <-time.After(5 * time.Second):
						t.Fatalf("lock on master %d: the waiter subscribed on master %d was not woken by the release", i, sub)
					}
					t.Logf("lock on master %d, waiter subscribed on master %d: handoff %v", i, sub, handoff)
					if handoff > 2*time.Second {
						t.Errorf("handoff %v; want well under the 10 s retry", handoff)
					}
					_ = next.Release(ctx)
				}
			})
		})
	}
}

// TestClusterReplicas: option.Replicas on a cluster sends the claim and its
// WAIT on one connection to the master serving the lock's slot, so WAIT
// counts that master's replicas for exactly that claim.
func TestClusterReplicas(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	replica := addReplica(t, cl, 0)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			lk := newLocker(t, c.Node, option.Replicas(1, 200*time.Millisecond))

			// Master 0 has a replica: acknowledged.
			key := keyOn(t, cl, 0, c.Name+"-rep-")
			l, err := lk.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire on the master with a replica: %v", err)
			}
			require.NoError(t, l.Release(ctx))

			// Its replica paused: refused, and nothing is left held.
			_, err = replica.Do("CLIENT", "PAUSE", "10000", "WRITE")
			require.NoError(t, err)
			_, err = lk.TryAcquire(ctx, key)
			_, uerr := replica.Do("CLIENT", "UNPAUSE")
			require.NoError(t, uerr)
			var re *single.ReplicaError
			if !errors.As(err, &re) || re.Acked != 0 || re.Wanted != 1 {
				t.Fatalf("TryAcquire with the replica paused: %v; want *ReplicaError{Acked: 0, Wanted: 1}", err)
			}
			if got := clusterField(t, cl, 0, key, "owner"); got != "" {
				t.Fatalf("owner %q after a refused claim; want none", got)
			}

			// Master 1 has none: refused, though master 0's replica is up.
			key = keyOn(t, cl, 1, c.Name+"-norep-")
			if _, err := lk.TryAcquire(ctx, key); !errors.As(err, &re) || re.Acked != 0 {
				t.Fatalf("TryAcquire on a master without replicas: %v; want *ReplicaError{Acked: 0}", err)
			}
		})
	}
}

// addReplica starts a cluster node and makes it a replica of master i, and
// returns once the master's WAIT counts it.
func addReplica(t *testing.T, cl *redistest.Cluster, i int) *redistest.Server {
	t.Helper()
	master := cl.Servers()[i]
	r := redistest.Start(t, redistest.WithClusterBus(), redistest.WithArgs(
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000",
	))
	do := func(s *redistest.Server, args ...string) string {
		t.Helper()
		out, err := s.Do(args...)
		require.NoError(t, err, "%s on %s", strings.Join(args, " "), s.Addr())
		return out
	}
	id := do(master, "CLUSTER", "MYID")
	mbus := strings.Split(do(master, "CONFIG", "GET", "cluster-port"), "\n")[1]
	do(r, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(master.Port()), mbus)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !strings.Contains(do(r, "CLUSTER", "NODES"), id) {
		if ctx.Err() != nil {
			t.Fatal("the new node never learned of the master")
		}
		time.Sleep(20 * time.Millisecond)
	}
	do(r, "CLUSTER", "REPLICATE", id)
	require.NoError(t, r.WaitSynced(ctx))
	// The master streams to a new replica only after its first ACK.
	probe := keyOn(t, cl, i, "probe-")
	for {
		_, err := master.Do("SET", probe, "1")
		require.NoError(t, err)
		if n, _ := master.Do("WAIT", "1", "100"); n == "1" {
			return r
		}
		if ctx.Err() != nil {
			t.Fatal("the replica never acknowledged a write")
		}
	}
}

// TestClusterSlotMove moves the slot of a held lock to another master, as
// a resharding would: the holder keeps extending and releasing it through
// the move, no contender takes it mid-move, and tokens keep rising on the
// new master.
func TestClusterSlotMove(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, c.Node), newLocker(t, c.Node)
			key := keyOn(t, cl, 0, c.Name+"-move-")
			slot := cl.Slot("dlock:{" + key + "}")

			// A history on the old master, then the lock held across the move.
			l0, err := a.TryAcquire(ctx, key)
			require.NoError(t, err)
			_ = l0.Release(ctx)
			held, err := a.TryAcquire(ctx, key, option.TTL(time.Minute))
			require.NoError(t, err)
			contend := func(stage string) {
				t.Helper()
				if l, err := b.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
					if l != nil {
						_ = l.Release(ctx)
					}
					t.Fatalf("%s: contender's TryAcquire: %v; want ErrTaken", stage, err)
				}
				if err := held.Extend(ctx, time.Minute); err != nil {
					t.Fatalf("%s: holder's Extend: %v", stage, err)
				}
			}

			move := cl.BeginMove(slot, 1)
			contend("migrating, keys on the old master")
			if n := move.MigrateKeys(); n < 1 {
				t.Fatalf("migrated %d keys; want the lock's hash", n)
			}
			contend("migrating, keys on the new master (ASK)")
			move.Finish()
			contend("moved")

			if got := clusterField(t, cl, 1, key, "owner"); got != held.Owner() {
				t.Fatalf("owner on the new master %q; want the holder's %q", got, held.Owner())
			}
			if err := held.Release(ctx); err != nil {
				t.Fatalf("Release after the move: %v", err)
			}
			next, err := b.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire after the release: %v", err)
			}
			if !(l0.Token() < held.Token() && held.Token() < next.Token()) {
				t.Fatalf("tokens %d, %d, %d across the move; want rising", l0.Token(), held.Token(), next.Token())
			}
			require.NoError(t, next.Release(ctx))
		})
	}
}

// TestClusterFreeLockMidMove: mid-move, with the hash still on the source
// of a migrating slot, a free lock with no waiters and no gone records is
// claimed there (the claim touches the hash alone) and its lease moves
// with the hash. A waiter for a held lock, whose ticket needs the queue's
// keys, which the source no longer serves, is refused with an error that
// is not ErrTaken and keeps trying until the keys have moved.
func TestClusterFreeLockMidMove(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			lk := newLocker(t, c.Node)
			key := keyOn(t, cl, 0, c.Name+"-free-")
			l0, err := lk.TryAcquire(ctx, key)
			require.NoError(t, err)
			_ = l0.Release(ctx)
			move := cl.BeginMove(cl.Slot("dlock:{"+key+"}"), 2)

			l1, err := lk.TryAcquire(ctx, key)
			require.NoError(t, err, "TryAcquire mid-move, hash on the source")
			if l1.Token() <= l0.Token() {
				t.Fatalf("token %d after %d; want larger", l1.Token(), l0.Token())
			}
			if got := clusterField(t, cl, 0, key, "owner"); got != l1.Owner() {
				t.Fatalf("owner on the source %q; want %q", got, l1.Owner())
			}
			// A waiter: refused while the queue's keys cannot be reached.
			if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("TryAcquire of the held lock mid-move: %v; want ErrTaken (the hash alone answers it)", err)
			}
			got := make(chan *lease.Lease, 1)
			go func() {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					t.Errorf("Acquire across the migration: %v", err)
				}
				got <- l
			}()
			time.Sleep(50 * time.Millisecond) // a few refused attempts
			move.MigrateKeys()
			move.Finish()
			if got := clusterField(t, cl, 2, key, "owner"); got != l1.Owner() {
				t.Fatalf("owner on the new master %q; want %q: the lease moves with the hash", got, l1.Owner())
			}
			require.NoError(t, l1.Release(ctx), "Release on the new master")
			l := <-got
			if l == nil {
				return
			}
			if l.Token() <= l1.Token() {
				t.Fatalf("token %d after %d; want larger", l.Token(), l1.Token())
			}
			if got := clusterField(t, cl, 2, key, "owner"); got != l.Owner() {
				t.Fatalf("owner on the new master %q; want %q", got, l.Owner())
			}
			require.NoError(t, l.Release(ctx))
		})
	}
}

// shapeRoundTrip locks key through a and b on the cluster cl: a plain
// grant, a waiter that gives up, a waiter queued behind it, the handoff
// on release. Every key the lock uses must sit in one slot.
func shapeRoundTrip(t *testing.T, cl *redistest.Cluster, a, b *single.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	held, err := a.TryAcquire(ctx, key)
	require.NoError(t, err, "key %q: TryAcquire", key)
	// An acquire that gives up while queued leaves the queue. Its
	// deadline leaves room for a first attempt on a loaded machine: a
	// wait that ends before any attempt answered is no refusal.
	gctx, gcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = b.Acquire(gctx, key)
	gcancel()
	if !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("key %q: Acquire until its deadline: %v; want ErrTaken", key, err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, key, option.Retry(time.Millisecond, 20*time.Millisecond))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(30 * time.Millisecond) // the waiter queues, most times
	require.NoError(t, held.Release(ctx), "key %q: Release", key)
	if err := <-got; err != nil {
		t.Fatalf("key %q: waiter: %v", key, err)
	}
	h := single.HashKey(key)
	slot := cl.Slot(h)
	for _, k := range []string{h + ":gone", h + ":q", h + ":qx", h + ":released"} {
		if got := cl.Slot(k); got != slot {
			t.Errorf("key %q: %q in slot %d, the lock's hash %q in %d", key, k, got, h, slot)
		}
	}
}
