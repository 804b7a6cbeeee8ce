package settings

import (
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/observe"
)

// Reporter returns the Reporter that tells o of its leases' renewals, loss
// and release, as Events; nil when o is nil, so that a lease with no
// observer builds no event.
func Reporter(o observe.Observer) leasing.Reporter {
	if o == nil {
		return nil
	}
	return reporter{o}
}

type reporter struct{ o observe.Observer }

var leaseEvents = [...]observe.EventKind{leasing.Renewed: observe.Renewed, leasing.Lost: observe.Lost, leasing.Released: observe.Released}

func (r reporter) Report(e leasing.Event, strategy, key string, err error) {
	r.o.Observe(observe.Event{Kind: leaseEvents[e], Strategy: strategy, Key: key, Err: err})
}
