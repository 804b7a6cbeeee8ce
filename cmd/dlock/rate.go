package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/ratelimit"
)

// rateUnits are the periods --rate takes without a number: 10/s.
var rateUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
}

// parseRate reads --rate: N/PERIOD, the period a unit (s, m, h, d, ms) or a
// Go duration (1h, 30s, 1m30s); burst 0 means N.
func parseRate(s string, burst int) (ratelimit.Limit, error) {
	n, per, ok := strings.Cut(s, "/")
	rate, err := strconv.Atoi(n)
	if !ok || err != nil {
		return ratelimit.Limit{}, fmt.Errorf("--rate %q: want N/PERIOD, such as 10/s, 100/m, 5/1h", s)
	}
	d, ok := rateUnits[per]
	if !ok {
		if d, err = time.ParseDuration(per); err != nil {
			return ratelimit.Limit{}, fmt.Errorf("--rate %q: the period %q is neither a unit (ms, s, m, h, d) nor a duration such as 1h or 30s", s, per)
		}
	}
	l := ratelimit.Limit{Rate: rate, Per: d, Burst: burst}
	if err := l.Check(); err != nil {
		var ae *lease.ArgError
		if errors.As(err, &ae) {
			// In the command's words: N/PERIOD and --burst.
			name := map[string]string{"limit.Rate": "N", "limit.Per": "PERIOD", "limit.Burst": "--burst"}[ae.Arg]
			return ratelimit.Limit{}, fmt.Errorf("--rate %q --burst %d: %s %v %s", s, burst, cmp.Or(name, ae.Arg), ae.Value, ae.Rule)
		}
		return ratelimit.Limit{}, fmt.Errorf("--rate %q --burst %d: %w", s, burst, err)
	}
	return l, nil
}

// admission is what CMD runs under with --rate: nothing held, nothing
// to lose or release.
type admission struct{}

func (admission) Token() fence.Token            { return 0 }
func (admission) Done() <-chan struct{}         { return nil }
func (admission) Err() error                    { return nil }
func (admission) Release(context.Context) error { return nil }

// admit waits, for --wait, until the rate limit on r.key admits one run.
func (r *runner) admit(ctx context.Context, locker *dlock.Client, cfg dlock.Config) (holding, *dlock.Client, int) {
	lim, err := ratelimit.New(locker.Nodes(), *r.rate, settings.OptionsFor(&cfg, settings.RateLimit)...)
	if err != nil {
		return nil, locker, r.failed(ctx, "rate limit", err)
	}
	defer lim.Close()
	var res ratelimit.Result
	if r.wait == 0 {
		res, err = lim.Allow(ctx, r.key)
	} else {
		wctx, cancel := context.WithTimeout(ctx, r.wait)
		res, err = lim.Wait(wctx, r.key)
		cancel()
	}
	switch {
	case err == nil && res.Allowed:
		if r.verbose {
			r.logf("admitted by the rate limit %s on %q; %d left", r.rate, r.key, res.Remaining)
		}
		return admission{}, locker, exitOK
	case err == nil, errors.Is(err, context.DeadlineExceeded) && context.Cause(ctx) == nil:
		r.logf("rate limit %s on %q: not admitted within --wait %v (next in %v)", r.rate, r.key, r.wait, res.RetryAfter.Round(time.Millisecond))
		return nil, locker, exitTaken
	}
	// ratelimit.ErrNoQuorum and the servers' errors: unavailable.
	return nil, locker, r.failed(ctx, "rate limit", err)
}
