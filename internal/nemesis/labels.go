package nemesis

import (
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/safety"
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
			ws = append(ws, safety.Window{Property: safety.MutualExclusion, From: e.Start, To: e.End.Add(linger), Why: why})
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
			if e.Start.After(c.End.Add(reach)) || c.Start.After(e.End.Add(reach)) {
				continue
			}
			to := e.End
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

// suspects returns the faults whose reach (start to end plus Linger)
// holds t: where to look for a violation's cause.
func suspects(p *Plan, events []*Event, t time.Time) []string {
	var out []string
	for _, e := range events {
		if e.Start.IsZero() || t.Before(e.Start) || t.After(e.End.Add(Linger(p))) {
			continue
		}
		out = append(out, e.String())
	}
	return out
}
