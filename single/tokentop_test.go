package single_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

// TestTokenTopOnServer: a lean key whose counter is within 2^20 of 2^53
// (only a hand edit makes one) is refused by the server's claim with
// DLTOKEN, TryAcquire and Acquire alike, and left as it was (GET, DUMP and
// its expiry); one just below the limit is still granted, its token exact.
func TestTokenTopOnServer(t *testing.T) {
	const limit = 1<<53 - 1<<20 // the lowest counter refused
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		for _, counter := range []int64{limit, limit + 1, 1<<53 - 1, 1 << 53} {
			key := "top-" + strconv.FormatInt(counter, 10)
			k := "dlock:{" + key + "}"
			srv.MustDo(t, "SET", k, strconv.FormatInt(counter, 10), "PX", "600000")
			before := srv.MustDo(t, "DUMP", k)
			for name, claim := range map[string]func(context.Context) error{
				"TryAcquire": func(ctx context.Context) error { _, err := lk.TryAcquire(ctx, key); return err },
				"Acquire":    func(ctx context.Context) error { _, err := lk.Acquire(ctx, key); return err },
			} {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				err := claim(ctx)
				cancel()
				if err == nil || !strings.Contains(err.Error(), "DLTOKEN") {
					t.Fatalf("%s of a lean key at %d: %v; want the server's DLTOKEN refusal", name, counter, err)
				}
				if got := srv.MustDo(t, "GET", k); got != strconv.FormatInt(counter, 10) {
					t.Fatalf("%s at %d: GET = %q after the refusal; want it unchanged", name, counter, got)
				}
				if got := srv.MustDo(t, "DUMP", k); got != before {
					t.Fatalf("%s at %d: DUMP changed by the refusal", name, counter)
				}
				if p, _ := strconv.ParseInt(srv.MustDo(t, "PTTL", k), 10, 64); p <= 590_000 {
					t.Fatalf("%s at %d: PTTL %d ms after the refusal; want its expiry unchanged", name, counter, p)
				}
			}
		}
		// Just below the limit: granted, with the next token exactly.
		const key = "top-below"
		srv.MustDo(t, "SET", "dlock:{"+key+"}", strconv.FormatInt(limit-1, 10), "PX", "600000")
		l, err := lk.TryAcquire(t.Context(), key)
		require.NoError(t, err, "TryAcquire of a lean key just below the limit")
		if l.Token() != limit {
			t.Errorf("token %d; want %d exactly", l.Token(), int64(limit))
		}
		require.NoError(t, l.Release(t.Context()), "Release")
	})
}
