package single_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/single"
)

// TestRollingUpgrade: while versions before the lean form (which keep
// every lock in the hash) and this one lock the same keys, neither hands
// a lock out twice. A hash an older version wrote is read as before: its
// lease is honoured and its counter goes on. An older version's claim on
// a key in the lean form is refused by the server (WRONGTYPE) and writes
// nothing.
func TestRollingUpgrade(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n)
		nowMs := func() int64 {
			t.Helper()
			v, err := srv.Do("EVAL", "local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)", "0")
			require.NoError(t, err)
			ms, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return ms
		}

		// An older holder's hash, its lease running: refused.
		h := "dlock:{older}"
		srv.MustDo(t, "HSET", h, "owner", "older-owner", "until", strconv.FormatInt(nowMs()+10_000, 10),
			"attempts", "1000", "exp", strconv.FormatInt(nowMs()+100_000, 10))
		srv.MustDo(t, "PEXPIRE", h, "100000")
		if _, err := lk.TryAcquire(ctx, "older"); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("TryAcquire of a lock an older version holds: %v; want ErrTaken", err)
		}
		// Released by the older version: taken, its counter going on.
		srv.MustDo(t, "HDEL", h, "owner", "until")
		l, err := lk.TryAcquire(ctx, "older")
		require.NoError(t, err, "TryAcquire of a lock an older version released")
		if l.Token() <= 1000 {
			t.Fatalf("token %d after the older version's 1000; want larger", l.Token())
		}
		require.NoError(t, l.Release(ctx))

		// An older version's claim on a key in the lean form.
		l, err = lk.TryAcquire(ctx, "lean")
		require.NoError(t, err)
		before := srv.MustDo(t, "GET", "dlock:{lean}")
		_, err = n.Eval(context.Background(), single.HashClaimScript, []string{"dlock:{lean}"}, "older-owner", "30000", "90000")
		var re *node.ReplyError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, "WRONGTYPE") {
			t.Fatalf("an older claim on a lean key: %v; want the server's WRONGTYPE", err)
		}
		if after := srv.MustDo(t, "GET", "dlock:{lean}"); after != before {
			t.Fatalf("lean key %q after the older claim; want %q unchanged", after, before)
		}
		if left := l.TTL(); left <= 0 || left > 30*time.Second {
			t.Fatalf("lease TTL %v after the older claim; want still running", left)
		}
		require.NoError(t, l.Release(ctx))
	})
}
