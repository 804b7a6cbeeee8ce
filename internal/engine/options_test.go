package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// primitive builds one single-server primitive with the base options
// given by value (TTL, idle TTL, retry, drift factor, observer).
type primitive struct {
	name string
	new  func(n node.Node, ttl, idle time.Duration, r settings.Pace, drift float64, o observe.Observer) error
}

var primitives = []primitive{
	{"single", func(n node.Node, ttl, idle time.Duration, r settings.Pace, drift float64, o observe.Observer) error {
		_, err := single.New(n, option.TTL(ttl), option.IdleTTL(idle), option.Retry(r.Min, r.Max),
			option.DriftFactor(drift), option.Observer(o))
		return err
	}},
	{"permits", func(n node.Node, ttl, idle time.Duration, r settings.Pace, drift float64, o observe.Observer) error {
		_, err := permits.New(n, option.TTL(ttl), option.IdleTTL(idle), option.Retry(r.Min, r.Max),
			option.DriftFactor(drift), option.Observer(o))
		return err
	}},
	{"rwlock", func(n node.Node, ttl, idle time.Duration, r settings.Pace, drift float64, o observe.Observer) error {
		_, err := rwlock.New(n, option.TTL(ttl), option.IdleTTL(idle), option.Retry(r.Min, r.Max),
			option.DriftFactor(drift), option.Observer(o))
		return err
	}},
	{"claims", func(n node.Node, ttl, idle time.Duration, r settings.Pace, drift float64, o observe.Observer) error {
		_, err := claims.New(n, "q", option.TTL(ttl), option.IdleTTL(idle), option.Retry(r.Min, r.Max),
			option.DriftFactor(drift), option.Observer(o))
		return err
	}},
}

// TestOptionsAgree: the four single-server primitives take the base
// options, zero values as the defaults, and refuse the same values with
// the same *lease.ArgError (argument and rule).
func TestOptionsAgree(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	good := settings.Pace{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	cases := []struct {
		name  string
		ttl   time.Duration
		r     settings.Pace
		drift float64
		arg   string // "" for none
	}{
		{"all good", time.Second, good, 0.01, ""},
		{"zero values select the defaults", 0, settings.Pace{}, 0, ""},
		{"ttl below zero", -time.Second, good, 0.01, "TTL"},
		{"ttl within the drift", 2 * time.Millisecond, good, 0.01, "TTL"},
		{"drift factor at 0.5", time.Second, good, 0.5, "DriftFactor"},
		{"drift factor below 0", time.Second, good, -0.1, "DriftFactor"},
		{"retry min above max", time.Second, settings.Pace{Min: time.Second, Max: time.Millisecond}, 0.01, "Retry"},
	}
	for _, c := range cases {
		var first *lease.ArgError
		for _, p := range primitives {
			err := p.new(n, c.ttl, 0, c.r, c.drift, nil)
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
