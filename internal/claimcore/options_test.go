package claimcore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// primitive builds one single-server primitive with the base options
// given by value (TTL, idle TTL, retry, drift factor, observer), each
// through the package's own With… option.
type primitive struct {
	name string
	new  func(n node.Node, ttl, idle time.Duration, r lease.Retry, drift float64, o observe.Observer) error
}

var primitives = []primitive{
	{"single", func(n node.Node, ttl, idle time.Duration, r lease.Retry, drift float64, o observe.Observer) error {
		_, err := single.New(n, single.WithTTL(ttl), single.WithIdleTTL(idle), single.WithRetry(r),
			single.WithDriftFactor(drift), single.WithObserver(o))
		return err
	}},
	{"permits", func(n node.Node, ttl, idle time.Duration, r lease.Retry, drift float64, o observe.Observer) error {
		_, err := permits.New(n, permits.WithTTL(ttl), permits.WithIdleTTL(idle), permits.WithRetry(r),
			permits.WithDriftFactor(drift), permits.WithObserver(o))
		return err
	}},
	{"rwlock", func(n node.Node, ttl, idle time.Duration, r lease.Retry, drift float64, o observe.Observer) error {
		_, err := rwlock.New(n, rwlock.WithTTL(ttl), rwlock.WithIdleTTL(idle), rwlock.WithRetry(r),
			rwlock.WithDriftFactor(drift), rwlock.WithObserver(o))
		return err
	}},
	{"claims", func(n node.Node, ttl, idle time.Duration, r lease.Retry, drift float64, o observe.Observer) error {
		_, err := claims.New(n, "q", claims.WithTTL(ttl), claims.WithIdleTTL(idle), claims.WithRetry(r),
			claims.WithDriftFactor(drift), claims.WithObserver(o))
		return err
	}},
}

// TestOptionsAgree: the four single-server primitives take the base
// options under the same names, with the same defaults, and refuse the
// same values with the same *lease.ArgError (argument and rule).
func TestOptionsAgree(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	for _, d := range []struct {
		name   string
		values []time.Duration // single's, permits', rwlock's, claims'
	}{
		{"DefaultTTL", []time.Duration{single.DefaultTTL, permits.DefaultTTL, rwlock.DefaultTTL, claims.DefaultTTL}},
		{"DefaultIdleTTL", []time.Duration{single.DefaultIdleTTL, permits.DefaultIdleTTL, rwlock.DefaultIdleTTL, claims.DefaultIdleTTL}},
	} {
		for i, v := range d.values {
			if v != d.values[0] {
				t.Errorf("%s: %s's %v, %s's %v; want one value", d.name, primitives[i].name, v, primitives[0].name, d.values[0])
			}
		}
	}
	good := lease.Retry{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	cases := []struct {
		name  string
		ttl   time.Duration
		r     lease.Retry
		drift float64
		arg   string // "" for none
	}{
		{"all good", time.Second, good, 0.01, ""},
		{"zero values select the defaults", 0, lease.Retry{}, 0, ""},
		{"ttl below zero", -time.Second, good, 0.01, "ttl"},
		{"ttl within the drift", 2 * time.Millisecond, good, 0.01, "ttl"},
		{"drift factor at 0.5", time.Second, good, 0.5, "drift factor"},
		{"drift factor below 0", time.Second, good, -0.1, "drift factor"},
		{"retry min above max", time.Second, lease.Retry{Min: time.Second, Max: time.Millisecond}, 0.01, "retry"},
	}
	for _, c := range cases {
		var first *lease.ArgError
		for _, p := range primitives {
			ttl := c.ttl
			if c.name == "zero values select the defaults" {
				ttl = single.DefaultTTL // a zero TTL is refused; the others' zero is their default
			}
			err := p.new(n, ttl, 0, c.r, c.drift, nil)
			if c.arg == "" {
				if err != nil {
					t.Errorf("%s: %s.New: %v; want no error", c.name, p.name, err)
				}
				continue
			}
			var ae *lease.ArgError
			if !errors.As(err, &ae) {
				t.Errorf("%s: %s.New: %v; want a *lease.ArgError", c.name, p.name, err)
				continue
			}
			if ae.Arg != c.arg {
				t.Errorf("%s: %s.New: argument %q; want %q", c.name, p.name, ae.Arg, c.arg)
			}
			if first == nil {
				first = ae
			} else if ae.Arg != first.Arg || ae.Rule != first.Rule {
				t.Errorf("%s: %s.New refuses with %q %q; %s with %q %q; want the same", c.name, p.name, ae.Arg, ae.Rule,
					primitives[0].name, first.Arg, first.Rule)
			}
		}
	}
}
