package ratelimit_test

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/ratelimit"
)

const day = 24 * time.Hour

// TestCheckRefuses: Check refuses the limits the servers cannot serve,
// naming the field, among them those whose interval or refill overflowed
// an int64 of ns and passed; and it admits the edges next to them.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		limit ratelimit.Limit
		arg   string // "" when admitted
	}{
		{ratelimit.Limit{Rate: 1, Per: math.MaxInt64, Burst: 1}, "limit.Per"},
		{ratelimit.Limit{Rate: 1e15, Per: math.MaxInt64}, "limit.Per"},
		{ratelimit.Limit{Rate: 1e15, Per: math.MaxInt64, Burst: 1e15}, "limit.Burst"},
		{ratelimit.Limit{Rate: math.MaxInt, Per: math.MaxInt64, Burst: 1}, "limit.Rate"},
		{ratelimit.Limit{Rate: 1, Per: time.Microsecond, Burst: math.MaxInt}, "limit.Burst"},
		{ratelimit.Limit{Rate: 1, Per: 999 * time.Nanosecond, Burst: 1}, "limit.Rate"},
		{ratelimit.Limit{Rate: 2, Per: 1999 * time.Nanosecond, Burst: 1}, "limit.Rate"},
		{ratelimit.Limit{Rate: 1, Per: ratelimit.MaxRefill + time.Microsecond, Burst: 1}, "limit.Per"},
		{ratelimit.Limit{Rate: 2, Per: ratelimit.MaxRefill + 2*time.Microsecond}, "limit.Per"},
		{ratelimit.Limit{Rate: 1, Per: day, Burst: 367}, "limit.Burst"},
		{ratelimit.Limit{Rate: 1, Per: 400 * day, Burst: 1}, "limit.Per"},
		{ratelimit.Limit{Rate: 1, Per: math.MaxInt64 / 1000, Burst: 1}, ""}, // 106 days
		// Admitted: the edges.
		{ratelimit.Limit{Rate: 1, Per: ratelimit.MaxRefill, Burst: 1}, ""},
		{ratelimit.Limit{Rate: 2, Per: ratelimit.MaxRefill}, ""},
		{ratelimit.Limit{Rate: 1, Per: day, Burst: 366}, ""},
		{ratelimit.Limit{Rate: 1, Per: time.Microsecond, Burst: 1}, ""},
		{ratelimit.Limit{Rate: 1e6, Per: time.Second, Burst: 1e6}, ""},
		{ratelimit.Limit{Rate: 1e15, Per: math.MaxInt64, Burst: 1e5}, ""},
		{ratelimit.Limit{Rate: math.MaxInt64 / 1000, Per: math.MaxInt64, Burst: 1}, ""},
	} {
		err := tc.limit.Check()
		if tc.arg == "" {
			if err != nil {
				t.Errorf("%+v: %v; want admitted", tc.limit, err)
			}
			continue
		}
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, lease.ErrInvalid) || ae.Rule == "" {
			t.Errorf("%+v: %v; want an *ArgError on %s with its rule", tc.limit, err, tc.arg)
		}
	}
}

// TestLimitEdges: every edge limit Check admits works on the servers,
// with each client: a burst is admitted, the next request refused, and
// RetryAfter and ResetAfter are what the interval says.
func TestLimitEdges(t *testing.T) {
	for _, tc := range []struct {
		limit ratelimit.Limit
		n     int           // the burst asked for at once, then again
		retry time.Duration // RetryAfter of the second ask, about
	}{
		{ratelimit.Limit{Rate: 1, Per: ratelimit.MaxRefill, Burst: 1}, 1, ratelimit.MaxRefill},
		{ratelimit.Limit{Rate: 2, Per: ratelimit.MaxRefill}, 2, ratelimit.MaxRefill},
		{ratelimit.Limit{Rate: 1, Per: day, Burst: 366}, 366, 366 * day},
		{ratelimit.Limit{Rate: 1e6, Per: time.Second, Burst: 1e6}, 1e6, time.Second},
		{ratelimit.Limit{Rate: 1e15, Per: math.MaxInt64, Burst: 1e5}, 1e5, time.Second}, // 10µs each
		{ratelimit.Limit{Rate: 3, Per: 7 * day, Burst: 52}, 52, 52 * ((7*day + 2) / 3).Truncate(time.Microsecond)},
	} {
		t.Run(strconv.Itoa(tc.n), func(t *testing.T) {
			forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
				lim := newLimiter(t, []node.Node{n}, tc.limit)
				ctx := t.Context()
				r, err := lim.AllowN(ctx, "edge", tc.n)
				require.NoError(t, err, "%v: AllowN(%d)", tc.limit, tc.n)
				if !r.Allowed || r.Remaining != 0 {
					t.Errorf("%v: AllowN(%d) on a full limit: %+v; want admitted, none left", tc.limit, tc.n, r)
				}
				if d := r.ResetAfter - tc.retry; d > 0 || d < -time.Second {
					t.Errorf("%v: ResetAfter %v; want about %v", tc.limit, r.ResetAfter, tc.retry)
				}
				r, err = lim.AllowN(ctx, "edge", tc.n)
				require.NoError(t, err, "%v: AllowN(%d) again", tc.limit, tc.n)
				if r.Allowed || r.Remaining >= tc.n {
					t.Errorf("%v: AllowN(%d) on an empty limit: %+v; want refused", tc.limit, tc.n, r)
				}
				if d := r.RetryAfter - tc.retry; d > 0 || d < -time.Second {
					t.Errorf("%v: RetryAfter %v; want about %v", tc.limit, r.RetryAfter, tc.retry)
				}
				pttl := srv.MustDo(t, "PTTL", ratelimit.KeyOf("edge"))
				if ms := time.Duration(mustAtoi(t, pttl)) * time.Millisecond; ms <= tc.retry-2*time.Second || ms > tc.retry+time.Millisecond {
					t.Errorf("%v: PTTL %s ms; want about %v", tc.limit, pttl, tc.retry)
				}
			})
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
