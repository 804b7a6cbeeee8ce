package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redistest"
)

// TestSentinels: three Sentinels promote the replica once the master dies,
// and a write the replica never got, with replication cut, is gone.
func TestSentinels(t *testing.T) {
	g := redistest.StartSentinels(t, 3)
	_, err := g.Master.Do("SET", "k", "replicated")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		if v, _ := g.Replica.Do("GET", "k"); v == "replicated" {
			break
		}
		require.NoError(t, ctx.Err(), "the write never reached the replica")
		time.Sleep(5 * time.Millisecond)
	}
	g.Link.Cut()
	_, err = g.Master.Do("SET", "k", "lost")
	require.NoError(t, err)
	start := time.Now()
	g.Master.Kill()
	if err := g.WaitPromoted(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %v after the master died", time.Since(start))
	if v, err := g.Replica.Do("GET", "k"); err != nil || v != "replicated" {
		t.Fatalf("GET k on the promoted replica = %q, %v; want the replicated value", v, err)
	}
}
