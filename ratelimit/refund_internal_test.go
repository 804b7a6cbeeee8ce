package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// The refund undoes an admission only while the key holds what it wrote:
// once a later admission stands on it, undoing it could give back more
// than it took, and the refund is not made.
func TestRefundOnlyTheLatest(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			key := []string{KeyOf("refund-" + c.Name)}
			// 1 per second, burst 3: interval 1 s, tolerance 3 s.
			admit := func() string {
				r, err := c.Node.Eval(ctx, gcraScript, key, "1000000", "3000000", "1")
				require.NoError(t, err)
				require.Equal(t, int64(1), r.Int(0), "admitted")
				return r.Str(4)
			}
			refund := func(written string) int64 {
				r, err := c.Node.Eval(ctx, refundScript, key, written, "1000000")
				require.NoError(t, err)
				return r.Int(0)
			}
			first := admit()
			second := admit()
			if got := refund(first); got != 0 {
				t.Errorf("refund of an admission another stands on: %d; want 0", got)
			}
			if got := refund(second); got != 1 {
				t.Errorf("refund of the latest admission: %d; want 1", got)
			}
			v := srv.MustDo(t, "GET", key[0])
			if v != first {
				t.Errorf("after the refund the key holds %q; want %q, as before the second admission", v, first)
			}
			if got := refund(first); got != 1 {
				t.Errorf("refund of the first, now the latest: %d; want 1", got)
			}
			if n := srv.MustDo(t, "EXISTS", key[0]); n != "0" {
				t.Errorf("both refunded, the key exists (%s); want it gone, the limit full", n)
			}
		})
	}
}
