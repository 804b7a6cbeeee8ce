package ratelimit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// The refund undoes an admission whatever came after it: the limit's TAT
// is replayed from the log without it, as if it never came, and gives
// back what it took, never more. An admission no longer logged (the keys
// gone, or a log overtaken by a script that keeps none) is not undone.
func TestRefundReplays(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			ctx := t.Context()
			keys := keysOf("refund-" + c.Name)
			const keep = "10000000" // 10 s
			// 1 per second, burst 3: interval 1 s, tolerance 3 s.
			admit := func() string {
				r, err := c.Node.Eval(ctx, gcraScript, keys, "1000000", "3000000", "1", keep)
				require.NoError(t, err)
				require.Equal(t, int64(1), r.Int(0), "admitted")
				return r.Str(4)
			}
			refund := func(id string) int64 {
				r, err := c.Node.Eval(ctx, refundScript, keys, id, keep)
				require.NoError(t, err)
				return r.Int(0)
			}
			first := admit()
			second := admit()
			if got := refund(first); got != 1 {
				t.Errorf("refund of an admission another stands on: %d; want 1", got)
			}
			// As if only the second came: its time plus one interval.
			at, _, _ := strings.Cut(second, ".")
			t2, err := strconv.ParseInt(at, 10, 64)
			require.NoError(t, err)
			if v := srv.MustDo(t, "GET", keys[0]); v != strconv.FormatInt(t2+1000000, 10) {
				t.Errorf("after the refund TAT is %s; want %d, the second's time plus the interval", v, t2+1000000)
			}
			if got := refund(first); got != 0 {
				t.Errorf("a second refund of the same admission: %d; want 0", got)
			}
			if got := refund(second); got != 1 {
				t.Errorf("refund of the second: %d; want 1", got)
			}
			if n := srv.MustDo(t, "EXISTS", keys[0], keys[1]); n != "0" {
				t.Errorf("both refunded, %s keys exist; want none, the limit full", n)
			}
			// A log overtaken by a script that keeps none (an earlier
			// version's admission, SET of TAT alone) is not replayed.
			third := admit()
			srv.MustDo(t, "SET", keys[0], "99999999999999999")
			if got := refund(third); got != 0 {
				t.Errorf("refund under a TAT the log does not know: %d; want 0", got)
			}
			srv.MustDo(t, "DEL", keys[0], keys[1])
		})
	}
}
