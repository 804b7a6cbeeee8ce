package quorum_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// Tests of the defaults real deployments run: persistence by snapshots,
// clients that retry, clocks that step back.

// defaultSave is Redis's own snapshot schedule, which test servers turn off
// unless asked.
var defaultSave = redistest.WithArgs("--save", "3600 1 300 100 60 10000")

// snapshot takes an RDB snapshot of s now and waits until it is on disk.
func snapshot(t *testing.T, s *redistest.Server) {
	t.Helper()
	before := do(t, s, "LASTSAVE")
	do(t, s, "BGSAVE")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if do(t, s, "LASTSAVE") != before {
			if st, _ := s.Info("rdb_last_bgsave_status"); st != "ok" {
				t.Fatalf("%s: BGSAVE status %q", s.Addr(), st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: BGSAVE not done in 5s", s.Addr())
		}
	}
}

// TestSnapshotRestore: three of five nodes restart from an RDB snapshot
// taken before a's lock was granted (Redis's default persistence): they
// come back with their old epoch and without a's lock. They must sit out as
// nodes that lost their data do, so b is not granted while a holds the
// lock, and b's token, once granted, is above a's.
func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	const ttl = 4 * time.Second
	forEachClient(t, func(t *testing.T, c string) {
		srvs := redistest.StartN(t, 5, defaultSave)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(ttl))
		ctx := t.Context()
		touch(t, lk, srvs, ttl)
		for _, s := range srvs[:3] {
			snapshot(t, s)
		}
		a, err := lk.TryAcquire(ctx, "k")
		require.NoError(t, err)
		lockOnAll(t, srvs, "k")
		for _, s := range srvs[:3] {
			s.Restart() // SIGKILL, back from the snapshot
		}
		restarted := time.Now()
		for {
			b, err := lk.TryAcquire(ctx, "k")
			if err == nil {
				if a.TTL() > 0 {
					t.Fatalf("b granted %v after the restarts while a holds the lock (%v left): tokens a %v, b %v",
						time.Since(restarted), a.TTL(), a.Token(), b.Token())
				}
				if b.Token() <= a.Token() {
					t.Errorf("b's token %v after a's %v; want larger", b.Token(), a.Token())
				}
				t.Logf("b granted %v after the restarts, a expired", time.Since(restarted))
				_ = b.Release(ctx)
				return
			}
			var qe *quorum.Error
			if !errors.As(err, &qe) {
				t.Fatalf("err = %v; want a quorum.Error", err)
			}
			if time.Since(restarted) > 5*ttl {
				t.Fatalf("still refused %v after the restarts: %v", time.Since(restarted), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestClockStepBack: a node whose clock ran an hour ahead when its epoch
// was stamped, and was then stepped back by NTP, votes again at once; it
// used to sit out for the size of the step.
func TestClockStepBack(t *testing.T) {
	const ttl = time.Second
	forEachClient(t, func(t *testing.T, c string) {
		ahead, clock := redistest.StartClocked(t)
		srvs := append([]*redistest.Server{ahead}, redistest.StartN(t, 4)...)
		clock.Jump(time.Hour)
		lk := newLocker(t, nodesOn(t, srvs, c), option.TTL(ttl))
		ctx := t.Context()
		touch(t, lk, srvs, ttl) // every node stamped, sat out and repaired; node 0 an hour ahead
		clock.Jump(-time.Hour)
		srvs[3].Kill()
		srvs[4].Kill() // a majority now needs node 0
		stepped := time.Now()
		for {
			l, err := lk.TryAcquire(ctx, "k")
			if err == nil {
				t.Logf("granted %v after the step back", time.Since(stepped))
				_ = l.Release(ctx)
				return
			}
			if time.Since(stepped) > 3*ttl {
				t.Fatalf("node 0 still sits out %v after its clock stepped back: %v", time.Since(stepped), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestRepairMargin: a node that lost its data is repaired from the marks
// the other nodes return in the same fan-out as its own vote, which may be
// read up to a node timeout before its sit-out ends by its own clock. The
// repair must therefore wait out the node timeout and the drift past the
// max TTL, not the max TTL alone.
func TestRepairMargin(t *testing.T) {
	const ttl = time.Second
	srvs := redistest.StartN(t, 5)
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.TTL(ttl))
	ctx := t.Context()
	touch(t, lk, srvs, ttl)
	srvs[0].Restart()
	restarted := time.Now()
	epoch := ""
	for {
		if l, err := lk.TryAcquire(ctx, "other"); err == nil {
			_ = l.Release(ctx)
		}
		e := do(t, srvs[0], "GET", "dlock:epoch")
		if epoch == "" {
			epoch = e
		}
		if r := do(t, srvs[0], "GET", "dlock:repaired"); r != "" && r == e {
			break
		}
		if time.Since(restarted) > 5*ttl {
			t.Fatalf("node 0 not repaired %v after its restart", time.Since(restarted))
		}
		time.Sleep(5 * time.Millisecond)
	}
	sat := time.Since(restarted)
	margin := testNodeTimeout + settings.Drift(ttl, settings.DefaultDriftFactor)
	t.Logf("repaired %v after the restart (epoch %s)", sat, epoch)
	if sat < ttl+margin {
		t.Errorf("repaired %v after the restart; want no sooner than max TTL + node timeout + drift (%v)", sat, ttl+margin)
	}
}

// goRedisDefault is a user's go-redis client with its default options,
// MaxRetries among them.
func goRedisDefault(t *testing.T, addr string) node.Node {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	n := goredis.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		_ = c.Close()
	})
	return n
}

// TestClientRetriesLostReply: a user's go-redis client with its default
// MaxRetries sends a script again when its reply is lost. A vote or a
// commit run again for the owner that made it must count as the grant it
// made, and a release run again after it succeeded is not a failure.
func TestClientRetriesLostReply(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	drops := make([]*redistest.Dropper, len(srvs))
	nodes := make([]node.Node, len(srvs))
	for i, s := range srvs {
		drops[i] = redistest.StartDropper(t, s.Addr())
		nodes[i] = goRedisDefault(t, drops[i].Addr())
	}
	lk := newLocker(t, nodes, option.DurableNodes(true), option.TTL(10*time.Second))
	ctx := t.Context()
	for range 3 { // load the scripts: a NOSCRIPT answer is a reply too
		l, err := lk.TryAcquire(ctx, "warm")
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	dropAll := func(skip int) {
		for _, d := range drops {
			d.Drop(skip, 1)
		}
	}
	dropped := func() int {
		n := 0
		for _, d := range drops {
			n += d.Dropped()
		}
		return n
	}

	before := dropped()
	dropAll(0) // every vote's reply
	a, err := lk.TryAcquire(ctx, "vote")
	if err != nil {
		t.Fatalf("TryAcquire with every vote's reply lost once: %v; want the lock", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	before = dropped()
	dropAll(0) // every release's reply
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release with every reply lost once: %v; want nil", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	if left := eventuallyNoLock(t, srvs, "vote"); len(left) > 0 {
		t.Errorf("lock left on %v after the release", left)
	}

	before = dropped()
	dropAll(1) // every commit's reply: the vote's passes
	b, err := lk.TryAcquire(ctx, "commit")
	if err != nil {
		t.Fatalf("TryAcquire with every commit's reply lost once: %v; want the lock", err)
	}
	if dropped()-before < lk.Quorum() {
		t.Fatalf("%d replies dropped; the test shows nothing", dropped()-before)
	}
	_ = b.Release(ctx)
}

// TestCloseBounded: Close returns within a bound even when a node is
// stopped and the user's clients have no timeouts at all, so calls to that
// node never end by themselves; it reports the calls it left behind.
func TestCloseBounded(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	nodes := make([]node.Node, len(srvs))
	clients := make([]*redis.Client, len(srvs))
	for i, s := range srvs {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
		nodes[i] = goredis.New(clients[i])
	}
	lk, err := quorum.New(nodes, option.DurableNodes(true), option.TTL(time.Second), option.NodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	ctx := t.Context()
	l, err := lk.TryAcquire(ctx, "k")
	require.NoError(t, err)
	resume := srvs[2].PauseOnce()
	defer func() {
		resume()
		for i := range nodes {
			_ = nodes[i].Close()
			_ = clients[i].Close()
		}
	}()
	_ = l.Release(ctx) // returns on a majority; node 2's part hangs
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- lk.Close() }()
	select {
	case err := <-done:
		t.Logf("Close returned after %v: %v", time.Since(start), err)
		if err == nil || !strings.Contains(err.Error(), srvs[2].Addr()) {
			t.Errorf("Close = %v; want an error naming the stopped node %s", err, srvs[2].Addr())
		}
	case <-time.After(15 * time.Second):
		resume()
		<-done
		t.Fatalf("Close still waiting 15s after it was called, with a node stopped")
	}
	resume()
}
