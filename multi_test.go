package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
)

// TestOpenMulti: the Client Open returns holds several keys at once on
// either strategy: a set whole, and a key of it against a lock on that
// key alone.
func TestOpenMulti(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	ctx := t.Context()
	one, err := dlock.Open(ctx, dlock.Config{Addrs: []string{srvs[0].Addr()}})
	require.NoError(t, err)
	defer one.Close()
	set, err := one.TryAcquireAll(ctx, []string{"in", "out"})
	require.NoError(t, err)
	if _, err := one.TryAcquire(ctx, "out"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("TryAcquire(out) under the set: %v; want ErrTaken", err)
	}
	require.NoError(t, set.Release(ctx))

	var addrs []string
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
	}
	q, err := dlock.Open(ctx, dlock.Config{Strategy: connect.StrategyQuorum, Addrs: addrs, TTL: 5 * time.Second, DurableNodes: true})
	require.NoError(t, err)
	defer q.Close()
	qset, err := q.TryAcquireAll(ctx, []string{"in", "out"})
	require.NoError(t, err, "TryAcquireAll on the quorum")
	if _, err := q.TryAcquire(ctx, "in"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("TryAcquire(in) under the quorum's set: %v; want ErrTaken", err)
	}
	require.NoError(t, qset.Release(ctx))
}
