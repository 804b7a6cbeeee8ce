package single_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestClockStepBackIdleLife shows what the default idle life buys and what
// a step back of the server's clock costs with it. While a key keeps its
// counter (its lease, and the default idle TTL after its release) the next
// token is counter + 1 whatever the clock did, and a fence admits it. Once the
// counter has expired, the next token is drawn from the server's clock
// alone: after a step back larger than the time since the last grant, it
// is below the last one, and the fence refuses its writes until the
// server's clock has caught up with where it stood. Time passes by steps
// of the server's wall clock, which Redis and Valkey expire keys by.
func TestClockStepBackIdleLife(t *testing.T) {
	srv, clock := redistest.StartClocked(t)
	ctx := t.Context()
	lk := newLocker(t, redistest.NodeFor(t, "go-redis", srv.Addr()))
	var guard fence.Guard
	take := func() fence.Token {
		t.Helper()
		l, err := lk.TryAcquire(ctx, "stepped")
		require.NoError(t, err, "TryAcquire")
		require.NoError(t, l.Release(ctx), "Release")
		return l.Token()
	}

	t1 := take()
	require.NoError(t, guard.Admit("r", t1))

	// Back 30 s, within the idle life: the counter stands, the token rises.
	clock.Jump(-30 * time.Second)
	t2 := take()
	if t2 != t1+1 {
		t.Fatalf("token %d after a step back within the idle life; want the counter's next, %d", t2, t1+1)
	}
	require.NoError(t, guard.Admit("r", t2), "fence, step back within the idle life")

	// The idle life runs out (the clock moves on past it, and the server
	// expires the released key), then the clock steps back 90 s: a minute
	// behind the last grant.
	clock.Jump(settings.DefaultIdleTTL + time.Second)
	for srv.MustDo(t, "EXISTS", "dlock:{stepped}") != "0" {
		time.Sleep(time.Millisecond)
	}
	clock.Jump(-90 * time.Second)
	t3 := take()
	var se *fence.StaleError
	if err := guard.Admit("r", t3); !errors.As(err, &se) || se.Highest != t2 {
		t.Fatalf("fence, token %d after the counter expired and a 90 s step back: %v; want refused below %d", t3, err, t2)
	}
	if behind := time.Duration(t2-t3) * time.Microsecond; behind < 50*time.Second || behind > 70*time.Second {
		t.Fatalf("new token %v behind the last; want about a minute: the step less the time since the last grant", behind)
	}

	// Once the server's clock is past where it stood, tokens pass the
	// fence again.
	clock.Jump(time.Minute)
	t4 := take()
	require.NoError(t, guard.Admit("r", t4), "fence, once the clock caught up")
}
