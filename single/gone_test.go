package single_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// TestLateClaimRefused runs the race an abandoned claim leaves by hand: the
// abandon reaches the server first (another connection, a retry), then the
// claim it gave up. The claim must be refused while the gone record lasts,
// on a hash that held locks and on one that never existed, though the fast
// path reads the record only when the hash's gone field says one may live;
// once the record lapsed, the field goes and the owner may claim again.
// The hash never expires before the record.
func TestLateClaimRefused(t *testing.T) {
	t.Parallel()
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n, option.TTL(time.Second), option.IdleTTL(100*time.Millisecond))
		for _, key := range []string{"late-used", "late-new"} {
			h := single.HashKey(key)
			if key == "late-used" {
				l, err := lk.TryAcquire(ctx, key)
				require.NoError(t, err)
				require.NoError(t, l.Release(ctx))
			}
			const owner = "0123456789abcdef0123456789abcdef"
			const keep = 2500 // ms: longer than the hash would live, 1.5 × (TTL + idle TTL)
			_, err := n.Eval(ctx, single.AbandonScript, []string{h}, owner, strconv.Itoa(keep))
			require.NoError(t, err)
			// The late claim, as the client sent it: owner, TTL, the hash's life.
			r, err := n.Eval(ctx, single.ClaimScript, []string{h}, owner, "1000", "2000")
			require.NoError(t, err)
			if len(r) != 3 || r.Int(1) != 0 {
				t.Fatalf("%s: late claim of an abandoned owner replied %v; want a refusal {ms left, 0, attempts}", key, r)
			}
			// Another owner claims, which moves the hash's expiry: never
			// before the record's end.
			other, err := lk.TryAcquire(ctx, key)
			require.NoError(t, err)
			require.NoError(t, other.Release(ctx))
			pttl, err := srv.Do("PTTL", h)
			require.NoError(t, err)
			if ms, _ := strconv.Atoi(pttl); ms < keep-200 {
				t.Errorf("%s: the hash's PTTL %s ms; want at least the gone record's %d ms, less the time since", key, pttl, keep)
			}
			time.Sleep(keep * time.Millisecond)
			r, err = n.Eval(ctx, single.ClaimScript, []string{h}, owner, "1000", "2000")
			require.NoError(t, err)
			// A grant replies the token, a plain integer.
			if len(r) != 1 || r.Int(0) <= 0 {
				t.Fatalf("%s: claim after the record lapsed replied %v; want a grant", key, r)
			}
			if g, _ := srv.Do("HGET", h, "gone"); g != "" {
				t.Errorf("%s: gone field %q after the record lapsed; want it dropped", key, g)
			}
		}
	})
}
