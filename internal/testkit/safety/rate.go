package safety

import (
	"fmt"
	"slices"
	"time"
)

// The properties of a rate limit (package ratelimit) and of a lease taken
// up from its handle (Resume).
const (
	// Rate: in every window, the requests admitted on a key are within the
	// bound docs/ratelimit.md derives, counting the faults inside the
	// window (CheckRate).
	Rate Property = "RATE"
	// RateFloor: in the stretches where no fault stands in the way, a key
	// admits at least a stated share of what its limit allows
	// (CheckRateFloor).
	RateFloor Property = "RATE floor"
	// Handle: a lease taken up from its handle keeps mutual exclusion and
	// carries the servers' token; a forged or ended handle is never taken
	// up or extended.
	Handle Property = "HANDLE"
)

// Interval is a rate limit's emission interval as docs/ratelimit.md
// defines it: per/rate, rounded up to a µs. It panics on a rate below 1.
func Interval(rate int, per time.Duration) time.Duration {
	if rate < 1 {
		panic(fmt.Sprintf("safety: rate %d: must be >= 1", rate))
	}
	ns := (per + time.Duration(rate) - 1) / time.Duration(rate)
	return (ns + time.Microsecond - 1).Truncate(time.Microsecond)
}

// Admission is one request a rate limit admitted, by a call that ran from
// Start to End: the servers admitted it at some moment in between.
type Admission struct {
	Start, End time.Time
	N          int // requests admitted at once; 0 means 1
}

func (a Admission) n() int { return max(a.N, 1) }

// Span is a stretch of time, From to To inclusive.
type Span struct{ From, To time.Time }

func (s Span) overlaps(a, b time.Time) bool { return !s.To.Before(a) && !s.From.After(b) }

// RateLimit is what CheckRate needs of a limit and the servers it runs
// on.
type RateLimit struct {
	Interval time.Duration // see Interval
	Burst    int
	Nodes    int // the servers the limit asks: 1, or N independent masters
	Majority int // how many must admit: 1, or N/2+1
	// Refills are, by node, the faults that hand that node up to a burst
	// more than its clock allows: a loss of the key (a restart without
	// persistence or from an older snapshot, a failover), a clock step
	// forward. Each one overlapping a window adds Burst to its node.
	Refills [][]Span
	// Refused are the ends of the calls the servers answered with a
	// refusal: a window holding one is judged though it admitted nothing
	// (the limit was there, and held).
	Refused []time.Time
	// Outages are when faults kept the limit out of the callers' reach:
	// a window inside one that holds no answer counts in
	// RateReport.Unreachable, not as a window left unjudged.
	Outages []Span
	// Slack widens each window's span, for the difference between the
	// clock the calls are timed by and the servers' (2 ms when 0).
	Slack time.Duration
}

// RateReport is what CheckRate found.
type RateReport struct {
	Windows, Judged int     // windows slid, and those holding an admission or a refusal
	Unreachable     int     // windows inside an outage, with no answer
	Worst           float64 // the largest admitted/bound of a judged window
	WorstFaulty     bool    // whether that window held a refill
	Violations      []Violation
}

// CheckRate slides a window of width over [from, to] by step and judges
// each window holding admissions (those whose calls ended in it) against
// the bound of docs/ratelimit.md: with a the earliest start and b the
// latest end of those calls, T = b − a + slack, at most
//
//	⌊ Σ_j ( Burst × (1 + R_j) + ⌊T / Interval⌋ ) / Majority ⌋
//
// requests, R_j the refills of node j overlapping [a, b]. Every node
// counts, down or not: the bound is loose by what a node down throughout
// the window would have taken, never tight. A window over it is a Rate
// violation dated by its last admission. A window with no admission is
// judged when it holds a refusal, and is Unreachable when it lies inside
// one of l.Outages.
func CheckRate(l RateLimit, adms []Admission, from, to time.Time, width, step time.Duration) RateReport {
	slack := l.Slack
	if slack == 0 {
		slack = 2 * time.Millisecond
	}
	as := slices.Clone(adms)
	slices.SortFunc(as, func(x, y Admission) int { return x.End.Compare(y.End) })
	refused := slices.Clone(l.Refused)
	slices.SortFunc(refused, func(x, y time.Time) int { return x.Compare(y) })
	var rep RateReport
	lo, rlo := 0, 0
	for t := from; !t.Add(width).After(to); t = t.Add(step) {
		rep.Windows++
		for lo < len(as) && as[lo].End.Before(t) {
			lo++
		}
		count := 0
		var a, b time.Time
		for i := lo; i < len(as) && as[i].End.Before(t.Add(width)); i++ {
			count += as[i].n()
			if a.IsZero() || as[i].Start.Before(a) {
				a = as[i].Start
			}
			b = as[i].End
		}
		for rlo < len(refused) && refused[rlo].Before(t) {
			rlo++
		}
		if count == 0 {
			switch {
			case rlo < len(refused) && refused[rlo].Before(t.Add(width)):
				rep.Judged++
			case slices.ContainsFunc(l.Outages, func(o Span) bool { return !o.From.After(t) && !o.To.Before(t.Add(width)) }):
				rep.Unreachable++
			}
			continue
		}
		rep.Judged++
		perNode := l.Burst + int((b.Sub(a)+slack)/l.Interval)
		sum, refills := 0, 0
		for j := range l.Nodes {
			sum += perNode
			if j < len(l.Refills) {
				for _, s := range l.Refills[j] {
					if s.overlaps(a, b) {
						sum += l.Burst
						refills++
					}
				}
			}
		}
		bound := sum / max(l.Majority, 1)
		if r := float64(count) / float64(max(bound, 1)); r > rep.Worst {
			rep.Worst, rep.WorstFaulty = r, refills > 0
		}
		if count > bound {
			rep.Violations = append(rep.Violations, Violation{Property: Rate, At: b, Detail: fmt.Sprintf(
				"%d admitted by calls from %s to %s (%v); bound %d (burst %d, interval %v, %d nodes, majority %d, %d refills in it)",
				count, Stamp(a), Stamp(b), b.Sub(a).Round(time.Millisecond), bound, l.Burst, l.Interval, l.Nodes, l.Majority, refills)})
		}
	}
	return rep
}

// FloorReport is what CheckRateFloor found.
type FloorReport struct {
	Windows, Judged int
	Min, Mean       float64 // admitted/ideal over the judged windows
	// Calm is the share of [from, to] outside every span of disturbed:
	// the time in which the floor holds the limit to its promise.
	Calm       float64
	Violations []Violation
}

// CheckRateFloor slides a window of width over [from, to] by step and,
// in each window that is calm (outside every span of disturbed) for at
// least minCalm, compares the admissions whose calls ended in its calm
// part with the ideal, the calm part's length over interval: a share
// below floor, by more than one admission (the call that straddles a
// calm part's edge, which counts for a short one), is a RateFloor
// violation dated by the window's start. The
// callers must want more than the limit admits, so that the ideal is what
// they would get.
func CheckRateFloor(interval time.Duration, adms []Admission, disturbed []Span, floor float64, from, to time.Time, width, step, minCalm time.Duration) FloorReport {
	ds := MergeSpans(disturbed)
	calmAt := func(t time.Time) bool {
		for _, d := range ds {
			if !t.Before(d.From) && !t.After(d.To) {
				return false
			}
		}
		return true
	}
	var rep FloorReport
	if span := to.Sub(from); span > 0 {
		calm := span
		for _, d := range ds {
			if a, b := Later(d.From, from), earliest(d.To, to); b.After(a) {
				calm -= b.Sub(a)
			}
		}
		rep.Calm = float64(calm) / float64(span)
	}
	sum := 0.0
	for t := from; !t.Add(width).After(to); t = t.Add(step) {
		rep.Windows++
		end := t.Add(width)
		calm := width
		for _, d := range ds {
			a, b := Later(d.From, t), earliest(d.To, end)
			if b.After(a) {
				calm -= b.Sub(a)
			}
		}
		if calm < minCalm {
			continue
		}
		count := 0
		for _, a := range adms {
			if !a.End.Before(t) && a.End.Before(end) && calmAt(a.End) {
				count += a.n()
			}
		}
		ideal := float64(calm) / float64(interval)
		share := float64(count) / ideal
		if rep.Judged == 0 || share < rep.Min {
			rep.Min = share
		}
		rep.Judged++
		sum += share
		if float64(count+1) < floor*ideal {
			rep.Violations = append(rep.Violations, Violation{Property: RateFloor, At: t, Detail: fmt.Sprintf(
				"%d admitted from %s in %v calm of %v; ideal %.1f, share %.0f%% < floor %.0f%%",
				count, Stamp(t), calm.Round(time.Millisecond), width, ideal, 100*share, 100*floor)})
		}
	}
	if rep.Judged > 0 {
		rep.Mean = sum / float64(rep.Judged)
	}
	return rep
}

// MergeSpans returns ss sorted and with overlapping spans joined.
func MergeSpans(ss []Span) []Span { return JoinSpans(ss, 0) }

// JoinSpans returns ss sorted, with the spans that overlap, touch or lie
// less than gap apart joined.
func JoinSpans(ss []Span, gap time.Duration) []Span {
	s := slices.Clone(ss)
	slices.SortFunc(s, func(a, b Span) int { return a.From.Compare(b.From) })
	var out []Span
	for _, x := range s {
		if n := len(out); n > 0 && (!x.From.After(out[n-1].To) || x.From.Sub(out[n-1].To) < gap) {
			out[n-1].To = Later(out[n-1].To, x.To)
			continue
		}
		out = append(out, x)
	}
	return out
}
