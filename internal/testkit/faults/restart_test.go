package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// TestRestartWithoutPersistence kills servers while A holds the lock and
// brings them back empty (no AOF). Quorum without the lost-data guard: 3 of
// 5 restarted empty are a new majority for B, while A still holds: a double
// grant. With the guard (the default), the restarted nodes sit out one max
// TTL and B is refused until A's lease is over. Single: the one server comes
// back with neither the lock nor its attempts counter, so B is granted while
// A holds (a double grant); B's token, floored at the server's clock in µs,
// is still above A's, so the fence refuses A. With AOF it keeps both.
func TestRestartWithoutPersistence(t *testing.T) {
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprintf("quorum/guard=%v", guard), func(t *testing.T) {
			t.Parallel()
			forEachClient(t, func(t *testing.T, client string) { restartQuorum(t, client, guard) })
		})
	}
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprintf("single/aof=%v", aof), func(t *testing.T) {
			t.Parallel()
			forEachClient(t, func(t *testing.T, client string) { restartSingle(t, client, aof) })
		})
	}
}

func restartQuorum(t *testing.T, client string, guard bool) {
	const ttl = time.Second
	row := &Row{Scenario: "6 restart without persistence", Strategy: "quorum", Client: client}
	opts := []option.Option{option.TTL(ttl)}
	if guard {
		row.Variant = "3 of 5 restarted empty, lost-data guard on"
		row.Expected = "B refused until one max TTL after the restart; no overlap"
	} else {
		row.Variant = "3 of 5 restarted empty, guard off (option.DurableNodes)"
		row.Expected = "double grant (overlap 1); fence refuses A (B read A's counter on the 2 intact nodes)"
		opts = append(opts, option.DurableNodes(true))
	}
	record(t, row)
	srvs := redistest.StartN(t, 5)
	lk := newQuorum(t, nodesOn(t, client, addrs(srvs)...), opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if guard {
		// Fresh nodes look like nodes that just lost their data.
		for {
			l, err := lk.TryAcquire(ctx, "warm")
			if err == nil {
				_ = l.Release(ctx)
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("fresh nodes never voted: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	res := newResource()
	var aOpts []option.Option
	if !guard {
		// A must outlast three restarts and B's first dials on a loaded
		// machine, or there is no double grant to show.
		aOpts = append(aOpts, option.TTL(4*ttl))
	}
	// A's grant returns once a majority voted; its other votes may still
	// be on their way. Restart only once A holds every node, or a vote
	// sent on after a restart lands on the empty server and A holds it
	// again, leaving B no majority while A's lease lasts. On a loaded
	// machine a vote may time out and be released instead: A lets go and
	// takes the lock again.
	var a *lease.Lease
	for a == nil {
		l, err := lk.TryAcquire(ctx, "k", aOpts...)
		require.NoError(t, err, "A")
		everywhere := time.Now().Add(time.Second)
		for _, s := range srvs {
			for !lockLeft(t, s, "k") && time.Now().Before(everywhere) {
				time.Sleep(time.Millisecond)
			}
		}
		if slices.ContainsFunc(srvs, func(s *redistest.Server) bool { return !lockLeft(t, s, "k") }) {
			if ctx.Err() != nil {
				t.Fatal("A's votes never reached every node")
			}
			require.NoError(t, l.Release(ctx), "A lets go: a vote of its timed out")
			continue
		}
		a = l
	}
	res.granted(a)
	_ = res.write(a, "a1")
	for _, s := range srvs[:3] {
		s.Restart()
	}
	restarted := time.Now()
	// B is another process, with connections of its own opened after the
	// restart. (On A's connections, broken by the restart, a failed
	// attempt's release can fail too and leave its vote holding a node for
	// a TTL, hiding the double grant this row is about.)
	lkB := newQuorum(t, nodesOn(t, client, addrs(srvs)...), opts...)

	var (
		b   *lease.Lease
		err error
	)
	tries, lostData := 0, 0
	var failed []time.Duration
	for b == nil {
		tries++
		start := time.Now()
		b, err = lkB.TryAcquire(ctx, "k")
		if err == nil {
			break
		}
		failed = append(failed, time.Since(start))
		var qe *quorum.Error
		if errors.As(err, &qe) {
			for _, n := range qe.Nodes {
				if n.Kind == quorum.KindSitsOut {
					lostData++
					break
				}
			}
		}
		if time.Since(restarted) > 3*ttl {
			t.Fatalf("B still refused %v after the restart: %v", time.Since(restarted), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	grantedAfter := time.Since(restarted)
	res.granted(b)
	_ = res.write(b, "b1")
	errA := res.write(a, "a2")
	_ = b.Release(ctx)
	res.fill(t, row)
	row.Acquired, row.Attempts = Int(1), Int(tries)
	if len(failed) > 0 {
		row.TimeToFailMs = Ms(float64(failed[len(failed)/2].Microseconds()) / 1000)
	}
	row.Observed = fmt.Sprintf("B granted %v after the restart (%d refusals naming lost data); tokens A %v, B %v; A's write after B's: %s",
		grantedAfter.Round(time.Millisecond), lostData, a.Token(), b.Token(), outcome(errA))
	if guard {
		if *row.Overlaps != 0 || grantedAfter < ttl-50*time.Millisecond || lostData == 0 {
			t.Errorf("overlaps %d, granted %v after the restart, %d lost-data refusals; want 0, >= max TTL (%v), > 0",
				*row.Overlaps, grantedAfter, lostData, ttl)
		}
		return
	}
	if *row.Overlaps != 1 || *row.UnfencedDoubleWrites != 1 {
		t.Errorf("overlaps %d, unfenced double writes %d; want the double grant shown: 1 and 1", *row.Overlaps, *row.UnfencedDoubleWrites)
	}
	if b.Token() <= a.Token() || *row.StaleAccepted != 0 || *row.FencedRefused != 1 {
		t.Errorf("tokens A %v B %v, stale accepted %d, refused %d; want B > A, 0 and 1", a.Token(), b.Token(), *row.StaleAccepted, *row.FencedRefused)
	}
}

func restartSingle(t *testing.T, client string, aof bool) {
	const ttl = time.Second
	row := &Row{Scenario: "6 restart without persistence", Strategy: "single", Client: client}
	var opts []redistest.Option
	if aof {
		row.Variant = "its node restarted, AOF (appendfsync always)"
		row.Expected = "lock and counter survive: B refused (taken); no overlap"
		opts = append(opts, redistest.WithAOF())
	} else {
		row.Variant = "its node restarted empty"
		row.Expected = "double grant (overlap 1); the counter restarts at the server clock: B's token > A's, so the fence refuses A"
	}
	record(t, row)
	srv := redistest.Start(t, opts...)
	lk := newSingle(t, redistest.NodeFor(t, client, srv.Addr()), option.TTL(ttl))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res := newResource()
	// One earlier lease, so A's token comes from a counter that has moved.
	l0, err := lk.TryAcquire(ctx, "k")
	require.NoError(t, err)
	res.granted(l0)
	_ = res.write(l0, "zero")
	res.released(l0)
	_ = l0.Release(ctx)
	a, err := lk.TryAcquire(ctx, "k")
	require.NoError(t, err, "A")
	res.granted(a)
	_ = res.write(a, "a1")
	srv.Restart()

	var b *lease.Lease
	tries := 0
	for {
		tries++
		b, err = lk.TryAcquire(ctx, "k")
		if err == nil || errors.Is(err, lease.ErrTaken) || ctx.Err() != nil || tries == 5 {
			break // a client may need a call to notice its broken connections
		}
		time.Sleep(20 * time.Millisecond)
	}
	row.Attempts, row.Acquired = Int(1), Int(0)
	if aof {
		res.fill(t, row)
		row.Observed = fmt.Sprintf("after the restart: %s; attempts counter %s",
			errKind(err), lockField(t, srv, "attempts"))
		if !errors.Is(err, lease.ErrTaken) {
			t.Errorf("B after a restart with AOF: %v; want taken", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("B after the restart: %v", err)
	}
	row.Acquired = Int(1)
	res.granted(b)
	errB := res.write(b, "b1")
	errA := res.write(a, "a2")
	_ = b.Release(ctx)
	res.fill(t, row)
	row.Observed = fmt.Sprintf("tokens A %v, B %v; B's write: %s; A's write after B's grant: %s",
		a.Token(), b.Token(), outcome(errB), outcome(errA))
	if *row.Overlaps != 1 || b.Token() <= a.Token() {
		t.Errorf("overlaps %d, tokens A %v B %v; want 1 and B's above A's (the clock floor)", *row.Overlaps, a.Token(), b.Token())
	}
	if errB != nil || !errors.Is(errA, fence.ErrStale) || *row.StaleAccepted != 0 || *row.FencedRefused != 1 {
		t.Errorf("B's write %v, A's write %v, stale accepted %d, fenced refused %d; want B accepted, A refused as stale, 0, 1",
			errB, errA, *row.StaleAccepted, *row.FencedRefused)
	}
}
