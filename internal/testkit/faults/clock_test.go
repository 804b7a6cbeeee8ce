package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestClockJump moves the wall clock of one server forward (a step of the
// system time) or makes it run fast, and Redis expires keys by it. Quorum:
// A holds the lock on exactly nodes 0-2 (3 and 4 are held by someone who
// then releases); node 2's clock runs past the TTL, so A's key vanishes
// there; B wins 2, 3, 4: two holders, which Redlock's timing argument
// cannot prevent. The quorum token still orders them (B read A's counter on
// node 2), so the fence refuses A. Single: its one server's clock decides
// alone, and its token (the attempts counter, floored at that clock)
// orders A and B.
func TestClockJump(t *testing.T) {
	cases := []struct {
		strategy, variant, client string
	}{
		{"quorum", "jump +3s on 1 of A's 3 nodes", goRedis},
		{"quorum", "jump +3s on 1 of A's 3 nodes", valkeyGo},
		{"quorum", "clock ×20 on 1 of A's 3 nodes", goRedis},
		{"quorum", "clock ×20 on 1 of A's 3 nodes", valkeyGo},
		{"quorum-notokens", "jump +3s on 1 of A's 3 nodes", valkeyGo},
		{"single", "jump +3s on its node", goRedis},
		{"single", "clock ×20 on its node", valkeyGo},
	}
	for _, c := range cases {
		t.Run(c.strategy+"/"+c.variant+"/"+c.client, func(t *testing.T) {
			t.Parallel()
			clockJump(t, c.strategy, c.variant, c.client)
		})
	}
}

func clockJump(t *testing.T, strategy, variant, client string) {
	const ttl = 2 * time.Second
	row := &Row{Scenario: "5 clock jump", Variant: variant, Strategy: strategy, Client: client,
		Expected: "two holders (overlap 1); B's token > A's; A's later write: unfenced accepted, fenced refused"}
	if strategy == "quorum-notokens" {
		row.Expected = "two holders (overlap 1); A's later write accepted: no token to fence with"
	}
	record(t, row)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	fast := variant[:5] == "clock"
	n := 5
	if strategy == "single" {
		n = 1
	}
	srvs := make([]*redistest.Server, n)
	clocks := make([]*redistest.Clock, n)
	for i := range srvs {
		srvs[i], clocks[i] = redistest.StartClocked(t)
	}
	skewed := 0
	var lk locker
	if strategy == "single" {
		lk = newSingle(t, redistest.NodeFor(t, client, srvs[0].Addr()), option.TTL(ttl))
	} else {
		opts := []option.Option{option.DurableNodes(true), option.TTL(ttl)}
		if strategy == "quorum-notokens" {
			opts = append(opts, option.Tokens(false))
		}
		lk = newQuorum(t, nodesOn(t, client, addrs(srvs)...), opts...)
		skewed = 2
		// Nodes 3 and 4 are held by C, whose lease is ending.
		for _, s := range srvs[3:] {
			do(t, s, "SET", "dlock:{k}:lock", "C", "PX", "60000")
		}
	}
	redistest.Warm(t, lk)
	res := newResource()
	var calls []int
	if strategy != "single" {
		for _, s := range srvs[3:] {
			calls = append(calls, settledCalls(t, s))
		}
	}

	a, err := lk.TryAcquire(ctx, "k")
	require.NoError(t, err, "A")
	res.granted(a)
	require.NoError(t, res.write(a, "a1"), "A's first write")
	if strategy != "single" {
		// A's grant returns with 3 votes; its votes on nodes 3 and 4 may
		// still be on their way. C releases only once they ran (refused:
		// C held), or a vote landing after the release would give A those
		// nodes too, and B could never win a majority.
		for i, s := range srvs[3:] {
			for scriptCalls(t, s) == calls[i] {
				if ctx.Err() != nil {
					t.Fatalf("A's vote never reached node %d", 3+i)
				}
				time.Sleep(time.Millisecond)
			}
			do(t, s, "DEL", "dlock:{k}:lock") // C releases
		}
	}
	if fast {
		clocks[skewed].SetRate(20)
	} else {
		clocks[skewed].Jump(ttl + time.Second)
	}
	// Redis 7.0 expires by the faked wall clock: A's key goes at once
	// after a jump, after TTL/20 of real time at ×20.
	gone := time.Now()
	var b *lease.Lease
	for b == nil {
		b, err = lk.TryAcquire(ctx, "k")
		if err != nil {
			if ctx.Err() != nil || a.TTL() <= 0 {
				t.Fatalf("B never acquired while A was valid: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	bAfter := time.Since(gone)
	clocks[skewed].SetRate(1) // the rest of the run at the real rate
	res.granted(b)
	if err := res.write(b, "b1"); err != nil {
		t.Errorf("B's write: %v", err)
	}
	aLeft := a.TTL()
	errA := res.write(a, "a2") // A, still valid by its own clock
	_ = b.Release(ctx)
	res.fill(t, row)
	row.Observed = fmt.Sprintf("B granted %v after the clock change, A still valid %v by its clock; tokens A %v, B %v; A's write after B's: %s",
		bAfter.Round(time.Millisecond), aLeft.Round(time.Millisecond), a.Token(), b.Token(), outcome(errA))
	if strategy == "quorum-notokens" {
		row.Observed = fmt.Sprintf("B granted %v after the clock change, A still valid %v by its clock; tokens 0",
			bAfter.Round(time.Millisecond), aLeft.Round(time.Millisecond))
	}
	if *row.Overlaps != 1 || *row.UnfencedDoubleWrites != 1 {
		t.Errorf("overlaps %d, unfenced double writes %d; want the double grant shown: 1 and 1", *row.Overlaps, *row.UnfencedDoubleWrites)
	}
	if strategy != "quorum-notokens" {
		if b.Token() <= a.Token() || errA == nil || *row.StaleAccepted != 0 || *row.FencedRefused != 1 {
			t.Errorf("tokens A %v B %v, A's write %v, stale accepted %d, refused %d; want B > A, A refused: 0 and 1",
				a.Token(), b.Token(), errA, *row.StaleAccepted, *row.FencedRefused)
		}
	}
}

// settledCalls is scriptCalls once s has run none for 50ms: calls of an
// earlier operation that returned before every node answered (a release
// returns once a majority released) have landed.
func settledCalls(t *testing.T, s *redistest.Server) int {
	t.Helper()
	n := scriptCalls(t, s)
	for {
		time.Sleep(50 * time.Millisecond)
		m := scriptCalls(t, s)
		if m == n {
			return n
		}
		n = m
	}
}
