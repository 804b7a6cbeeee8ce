package nemesis

import (
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// Linger is how long after a fault its windows stay open: one max TTL (a
// lease granted before the fault has ended by then, renewals aside, which
// the fault refuses) and a second.
func Linger(p *Plan) time.Duration { return p.TTL + time.Second }

// Windows returns the stretches of time in which the strategy does not
// promise a property, given the faults as they ran (the package doc gives
// the table). Every violation outside them is a promise broken.
func Windows(p *Plan, events []*Event) []safety.Window {
	var ws []safety.Window
	linger := Linger(p)
	ran := func(e *Event) bool { return e.Skipped == "" && !e.Start.IsZero() }
	isClock := func(e *Event) bool { return e.Kind == ClockForward || e.Kind == ClockBack }
	for _, e := range events {
		if !ran(e) {
			continue
		}
		why := e.Fault.String()
		switch {
		case isClock(e):
			// Both kinds step the clock forward once: at the start, or back
			// to the real time at the end. Redlock cannot survive that, nor
			// can a lease judged by one server's clock.
			ws = append(ws, safety.Window{Property: safety.MutualExclusion, From: e.Start, To: e.End.Add(linger), Why: why})
		case p.Strategy == Single && e.LostData():
			ws = append(ws, safety.Window{Property: safety.MutualExclusion, From: e.Start, To: lossEnd(e).Add(linger), Why: why})
		}
	}
	if p.Strategy != Single {
		return ws
	}
	// The single token is floored at the server's clock: after a loss of
	// the latest claims, it keeps rising only while that clock is not
	// behind the one that issued them. A clock fault near a loss breaks
	// that, whichever comes first: a jump forward before it (the tokens
	// issued then are ahead), or a step back after it (the first claims on
	// the emptied counter take the clock's word).
	for _, e := range events {
		if !ran(e) || !e.LostData() {
			continue
		}
		for _, c := range events {
			if !ran(c) || !isClock(c) {
				continue
			}
			reach := c.Jump + time.Second
			if e.Start.After(c.End.Add(reach)) || c.Start.After(lossEnd(e).Add(reach)) {
				continue
			}
			to := lossEnd(e)
			if c.End.After(to) {
				to = c.End
			}
			why := fmt.Sprintf("%s near %s", e.Fault.String(), c.Fault.String())
			for _, prop := range []safety.Property{safety.Order, safety.Fencing} {
				ws = append(ws, safety.Window{Property: prop, From: e.Start, To: to.Add(reach), Why: why})
			}
		}
	}
	return ws
}

// lossEnd is when a fault that lost a single master's data stopped
// losing it: a kill's restart, or, for a failover, the moment the clients
// moved to the promoted replica (the old master's restart and sync after
// that are a replica's).
func lossEnd(e *Event) time.Time {
	if !e.Moved.IsZero() {
		return e.Moved
	}
	return e.End
}

// suspects returns the faults whose reach holds t: where to look for a
// violation's cause. A fault reaches from its start to its end plus
// Linger, and a clock fault a jump and a second further (the single
// token's floor; see Windows).
func suspects(p *Plan, events []*Event, t time.Time) []string {
	var out []string
	for _, e := range events {
		reach := e.End.Add(Linger(p))
		if e.Kind == ClockForward || e.Kind == ClockBack {
			reach = reach.Add(e.Jump + time.Second)
		}
		if e.Start.IsZero() || t.Before(e.Start) || t.After(reach) {
			continue
		}
		out = append(out, e.String())
	}
	return out
}

// Judged returns the share of [from, to] that no window of prop covers:
// how much of a run a property was held to.
func Judged(ws []safety.Window, prop safety.Property, from, to time.Time) float64 {
	type span struct{ a, b time.Time }
	var spans []span
	for _, w := range ws {
		if w.Property != prop || w.To.Before(from) || w.From.After(to) {
			continue
		}
		a, b := w.From, w.To
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		spans = append(spans, span{a, b})
	}
	slices.SortFunc(spans, func(x, y span) int { return x.a.Compare(y.a) })
	var covered time.Duration
	var end time.Time
	for _, s := range spans {
		if s.a.Before(end) {
			s.a = end
		}
		if s.b.After(s.a) {
			covered += s.b.Sub(s.a)
			end = s.b
		}
	}
	total := to.Sub(from)
	if total <= 0 {
		return 1
	}
	return 1 - float64(covered)/float64(total)
}
