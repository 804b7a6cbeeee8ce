package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// TestFailoverRace is the seed's opening: A claims on a master whose write
// never reaches its replica; the master dies; the replica is promoted; B
// claims on it. Without option.Replicas both hold the lock: the double grant
// is not prevented. The promoted replica never saw A's increment of the
// attempts counter, but the token is floored at the server's clock in µs,
// so B's token, taken later, is LARGER than A's and the fence refuses A's
// stale write. That order holds while the promoted replica's clock is not
// behind the old master's by more than the time between the two claims
// (here both run on one host's clock). With option.Replicas(1, 100ms), A's
// claim is refused (WAIT counts 0 replicas). The quorum strategy has no
// replication to fail over: not applicable.
func TestFailoverRace(t *testing.T) {
	for _, replicas := range []bool{false, true} {
		variant := "async replica, no WAIT"
		if replicas {
			variant = "option.Replicas(1, 100ms)"
		}
		t.Run(fmt.Sprintf("replicas=%v", replicas), func(t *testing.T) {
			t.Parallel()
			forEachClient(t, func(t *testing.T, client string) { failoverRace(t, client, replicas, variant) })
		})
	}
}

func failoverRace(t *testing.T, client string, replicas bool, variant string) {
	const ttl = 2 * time.Second
	row := &Row{Scenario: "1 failover race", Variant: variant, Strategy: "single", Client: client}
	if replicas {
		row.Expected = "A's claim refused (WAIT acked 0 of 1); one holder; no overlap"
	} else {
		row.Expected = "two holders (overlap); B's token, floored at the server clock, is larger than A's: the fence refuses A's stale write"
	}
	record(t, row)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	master := redistest.Start(t)
	replica := redistest.Start(t, redistest.WithReplicaOf(master))
	require.NoError(t, replica.WaitSynced(ctx))
	// A master streams to a fresh replica only after the replica's first
	// ACK (sent once a second): until then WAIT counts 0 replicas.
	do(t, master, "SET", "probe", "1")
	for do(t, replica, "GET", "probe") != "1" {
		if ctx.Err() != nil {
			t.Fatal("the replica never received a write")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var opts []option.Option
	if replicas {
		opts = append(opts, option.Replicas(1, 100*time.Millisecond))
	}
	lkA := newSingle(t, redistest.NodeFor(t, client, master.Addr()), append(opts, option.TTL(ttl))...)
	lkB := newSingle(t, redistest.NodeFor(t, client, replica.Addr()), option.TTL(ttl))
	res := newResource()

	// A history that did replicate: the replica holds the key's counter,
	// so B's token is not larger merely because the replica started empty.
	l0, err := lkA.TryAcquire(ctx, "k")
	require.NoError(t, err)
	res.granted(l0)
	_ = res.write(l0, "zero")
	res.released(l0)
	require.NoError(t, l0.Release(ctx))
	for lockField(t, replica, "attempts") != l0.Token().String() ||
		lockField(t, replica, "owner") != "" {
		if ctx.Err() != nil {
			t.Fatal("the first claim and its release never reached the replica")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The replica stops applying the replication stream: A's claim will
	// be acknowledged by the master alone.
	do(t, replica, "CLIENT", "PAUSE", "10000", "WRITE")
	a, errA := lkA.TryAcquire(ctx, "k")
	if a != nil {
		res.granted(a)
		if err := res.write(a, "a1"); err != nil {
			t.Errorf("A's first write: %v", err)
		}
	}
	master.Kill()
	do(t, replica, "REPLICAOF", "NO", "ONE") // before unpausing: the buffered claim is dropped
	do(t, replica, "CLIENT", "UNPAUSE")

	b, errB := lkB.TryAcquire(ctx, "k")
	require.NoError(t, errB, "B on the promoted replica")
	res.granted(b)
	if err := res.write(b, "b1"); err != nil {
		t.Errorf("B's write: %v", err)
	}
	var errA2 error
	if a != nil {
		errA2 = res.write(a, "a2") // A still holds by its own clock
	}
	res.fill(t, row)

	if replicas {
		var re *single.ReplicaError
		if !errors.As(errA, &re) || re.Acked != 0 {
			t.Fatalf("A's acquire = %v; want a ReplicaError with 0 acks", errA)
		}
		row.Observed = fmt.Sprintf("A refused: %q; B token %v", errKind(errA), b.Token())
		if *row.Overlaps != 0 || *row.StaleAccepted != 0 {
			t.Errorf("overlaps %d, stale accepted %d; want 0 and 0", *row.Overlaps, *row.StaleAccepted)
		}
		return
	}
	if errA != nil {
		t.Fatalf("A's acquire on the master: %v", errA)
	}
	row.Observed = fmt.Sprintf("A token %v, B token %v on the promoted replica (A's claim was lost; B's token is %v µs of server clock later); A's write after B's: %v",
		a.Token(), b.Token(), int64(b.Token())-int64(a.Token()), outcome(errA2))
	if a.TTL() <= 0 {
		t.Fatalf("A's lease ended before B's grant; the run shows nothing")
	}
	if *row.Overlaps != 1 || *row.UnfencedDoubleWrites != 1 {
		t.Errorf("overlaps %d, unfenced double writes %d; want the double grant shown: 1 and 1",
			*row.Overlaps, *row.UnfencedDoubleWrites)
	}
	if b.Token() <= a.Token() {
		t.Errorf("B's token %v, A's %v; want B's larger: the token is floored at the server clock", b.Token(), a.Token())
	}
	if !errors.Is(errA2, fence.ErrStale) || *row.StaleAccepted != 0 || *row.FencedRefused != 1 {
		t.Errorf("A's stale write: %v, stale accepted %d, fenced refused %d; want it refused as stale: 0 and 1",
			errA2, *row.StaleAccepted, *row.FencedRefused)
	}
}

func outcome(err error) string {
	if err == nil {
		return "accepted"
	}
	return "refused"
}
