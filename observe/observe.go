// Package observe is the hook through which dlock reports the life of
// locks (Observer, Event), turned into structured logs (Log) and combined
// (Multi). Package observe/otelmetric turns it into OpenTelemetry metrics.
//
// Wire an observer into a Locker, a primitive, a rate limiter or an
// election with option.Observer. Observers run synchronously on the paths
// they report, so the ones here do a bounded amount of work and never
// block on I/O of their own; a slog.Handler that blocks still blocks its
// caller.
package observe

// Multi returns an Observer that passes every Event to each of obs in
// order. Nil observers are dropped and nested Multis flattened. It returns
// nil when no observer is left, so that a strategy given the result skips
// building events altogether, and the observer itself when only one is.
func Multi(obs ...Observer) Observer {
	var all multi
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case multi:
			all = append(all, o...)
		default:
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

type multi []Observer

func (m multi) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}
