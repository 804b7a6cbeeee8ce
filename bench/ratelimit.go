package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/ratelimit"
)

// One Allow as one op: dlock's ratelimit.Limiter on one server beside
// go-redis/redis_rate, both GCRA in one script, both on a go-redis
// client of their own made alike, in the same run. Two regimes: a limit
// so high that every call is admitted (a write each), and one so low
// that all calls but the first are refused (no write).

// rateRegimes are the limits of the two regimes.
var rateRegimes = []struct {
	name           string
	rate, burst    int
	per            time.Duration
	mustBeAdmitted bool
}{
	{"ratelimit always-admit", 1_000_000, 1_000_000, time.Second, true},
	{"ratelimit mostly-refused", 1, 1, time.Hour, false},
}

// errRefused is an always-admit op's error when the limit refused it:
// the regime is not what it claims.
var errRefused = errors.New("refused under a limit meant to admit every call")

// ratelimitSubjects are the rate-limit cases, measured as lock+unlock is.
func ratelimitSubjects() []subject {
	var s []subject
	for _, r := range rateRegimes {
		s = append(s,
			subject{library: "dlock", strategy: r.name, client: "go-redis", nodes: 1,
				setup: func(_ context.Context, addrs []string) (*instance, error) {
					ns, closeAll, err := nodes("go-redis", addrs[:1])
					if err != nil {
						return nil, err
					}
					lim, err := ratelimit.New([]node.Node{ns[0]}, ratelimit.Limit{Rate: r.rate, Per: r.per, Burst: r.burst})
					if err != nil {
						closeAll()
						return nil, err
					}
					return &instance{
						op: func(ctx context.Context, key string) error {
							res, err := lim.Allow(ctx, key)
							if err == nil && r.mustBeAdmitted && !res.Allowed {
								return errRefused
							}
							return err
						},
						close: func() {
							lim.Close()
							closeAll()
						},
					}, nil
				}},
			subject{library: "redis_rate", strategy: r.name, client: "go-redis", nodes: 1,
				setup: func(_ context.Context, addrs []string) (*instance, error) {
					c := newGoRedis(addrs[0])
					lim := redis_rate.NewLimiter(c)
					limit := redis_rate.Limit{Rate: r.rate, Burst: r.burst, Period: r.per}
					return &instance{
						op: func(ctx context.Context, key string) error {
							res, err := lim.Allow(ctx, key, limit)
							if err == nil && r.mustBeAdmitted && res.Allowed == 0 {
								return errRefused
							}
							return err
						},
						close: func() { c.Close() },
					}, nil
				}},
		)
	}
	return s
}

// ratelimitChecks compares dlock's Allow with redis_rate's, same client,
// same run: c=1 p50 latency and c=64 calls/s, in each regime. The
// targets say only that dlock is not slower; the ratios are the point.
func ratelimitChecks(rs []Result) []Check {
	var out []Check
	for _, r := range rateRegimes {
		get := func(lib string, c int) *Result {
			return find(rs, func(x Result) bool {
				return x.Library == lib && x.Strategy == r.name && x.Client == "go-redis" && x.Concurrency == c
			})
		}
		d1, p1 := get("dlock", 1), get("redis_rate", 1)
		if d1 != nil && p1 != nil && d1.P50us != nil && p1.P50us != nil && *p1.P50us > 0 {
			out = append(out, atMostCheck(fmt.Sprintf("%s c=1 go-redis p50 <= 1.1x redis_rate's", r.name), d1.ID,
				*d1.P50us / *p1.P50us, 1.1, "x redis_rate p50"))
		}
		d64, p64 := get("dlock", parallelism), get("redis_rate", parallelism)
		if d64 != nil && p64 != nil && d64.OpsPerS != nil && p64.OpsPerS != nil && *p64.OpsPerS > 0 {
			out = append(out, atLeastCheck(fmt.Sprintf("%s c=64 go-redis >= 0.9x redis_rate calls/s", r.name), d64.ID,
				*d64.OpsPerS / *p64.OpsPerS, 0.9, "x redis_rate"))
		}
	}
	return out
}
