package rueidis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	rueidisnode "github.com/dlockgo/dlock/node/rueidis"
)

// TestSentinel: a Node on a rueidis Sentinel client runs scripts, WAITs
// and hears releases on the master, and, once Sentinel promoted the
// replica of a killed master, runs them on the new one.
func TestSentinel(t *testing.T) {
	g := redistest.StartSentinels(t, 3)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: g.Addrs(), DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: g.Name}})
	require.NoError(t, err)
	n := rueidisnode.New(c)
	t.Cleanup(func() { _ = n.Close(); c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	incr := node.NewScript(`return redis.call('INCR', KEYS[1])`)
	if got := n.String(); got != g.Master.Addr() {
		t.Errorf("String() = %q; want the master's %q", got, g.Master.Addr())
	}
	res, acked, err := n.Pipeline(ctx, []node.Call{{Script: incr, Keys: []string{"k"}}}, node.Wait{Replicas: 1, Timeout: 2 * time.Second})
	if err != nil || res[0].Err != nil || res[0].Reply.Int(0) != 1 || acked != 1 {
		t.Fatalf("Pipeline with WAIT: %+v, acked %d, %v; want 1, acked by the replica", res, acked, err)
	}
	msgs, stop, err := n.Subscribe(ctx, "rel")
	require.NoError(t, err)
	defer stop()
	g.Master.MustDo(t, "PUBLISH", "rel", "x")
	select {
	case <-msgs:
	case <-ctx.Done():
		t.Fatal("no message from the master")
	}

	g.Master.Kill()
	require.NoError(t, g.WaitPromoted(ctx))
	redistest.Settled(t, func(ctx context.Context) error {
		_, err := n.Eval(ctx, incr, []string{"k"})
		return err
	})
	if got := n.String(); got != g.Replica.Addr() {
		t.Errorf("String() after the failover = %q; want the promoted replica's %q", got, g.Replica.Addr())
	}
	if got, _ := strconv.Atoi(g.Replica.MustDo(t, "GET", "k")); got < 2 {
		t.Errorf("k on the promoted replica = %d; want the calls after the failover counted there", got)
	}
}
