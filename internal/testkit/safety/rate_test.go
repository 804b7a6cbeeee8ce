package safety

import (
	"testing"
	"time"
)

func TestInterval(t *testing.T) {
	for _, c := range []struct {
		rate int
		per  time.Duration
		want time.Duration
	}{
		{20, time.Second, 50 * time.Millisecond},
		{7, 300 * time.Millisecond, 42858 * time.Microsecond}, // 42857.14… rounded up
		{3, time.Microsecond, time.Microsecond},
	} {
		if got := Interval(c.rate, c.per); got != c.want {
			t.Errorf("Interval(%d, %v) = %v; want %v", c.rate, c.per, got, c.want)
		}
	}
}

// gcra admits, at each of times, as the server's script does.
func gcra(interval time.Duration, burst int, times []time.Time) []Admission {
	var out []Admission
	var tat time.Time
	for _, now := range times {
		if tat.Before(now) {
			tat = now
		}
		if next := tat.Add(interval); !next.Add(-time.Duration(burst) * interval).After(now) {
			tat = next
			out = append(out, Admission{Start: now, End: now})
		}
	}
	return out
}

func everyMs(from time.Time, d time.Duration) []time.Time {
	var ts []time.Time
	for t := from; t.Before(from.Add(d)); t = t.Add(time.Millisecond) {
		ts = append(ts, t)
	}
	return ts
}

func TestCheckRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	iv := Interval(20, time.Second)
	l := RateLimit{Interval: iv, Burst: 5, Nodes: 1, Majority: 1}
	good := gcra(iv, 5, everyMs(t0, 3*time.Second))
	rep := CheckRate(l, good, t0, t0.Add(3*time.Second), 500*time.Millisecond, 10*time.Millisecond)
	if len(rep.Violations) > 0 || rep.Judged != rep.Windows || rep.Judged == 0 {
		t.Fatalf("a GCRA trace: %d violations (%v), judged %d of %d; want none, all", len(rep.Violations), rep.Violations, rep.Judged, rep.Windows)
	}
	// The key lost at 0.2 s, the first burst still in the window: the
	// limit restarts full, a burst more.
	lost := append(gcra(iv, 5, everyMs(t0, 200*time.Millisecond)), gcra(iv, 5, everyMs(t0.Add(200*time.Millisecond), 2800*time.Millisecond))...)
	rep = CheckRate(l, lost, t0, t0.Add(3*time.Second), 500*time.Millisecond, 10*time.Millisecond)
	if len(rep.Violations) == 0 {
		t.Fatal("a key lost without a refill told: no violation; want some")
	}
	l.Refills = [][]Span{{{t0.Add(190 * time.Millisecond), t0.Add(210 * time.Millisecond)}}}
	rep = CheckRate(l, lost, t0, t0.Add(3*time.Second), 500*time.Millisecond, 10*time.Millisecond)
	if len(rep.Violations) > 0 {
		t.Fatalf("a key lost, the refill told: %v; want none", rep.Violations)
	}
	// Two limits' worth on a quorum of 3: over ⌊3 × single / 2⌋.
	q := RateLimit{Interval: iv, Burst: 5, Nodes: 3, Majority: 2}
	double := append(good, gcra(iv, 5, everyMs(t0.Add(time.Microsecond), 3*time.Second))...)
	rep = CheckRate(q, double, t0, t0.Add(3*time.Second), 500*time.Millisecond, 10*time.Millisecond)
	if len(rep.Violations) == 0 {
		t.Fatal("twice the rate on a quorum of 3: no violation; want some")
	}
}

func TestCheckRateFloor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	iv := Interval(20, time.Second)
	good := gcra(iv, 5, everyMs(t0, 4*time.Second))
	rep := CheckRateFloor(iv, good, nil, 0.9, t0, t0.Add(4*time.Second), time.Second, 100*time.Millisecond, 250*time.Millisecond)
	if len(rep.Violations) > 0 || rep.Judged != rep.Windows || rep.Min < 0.9 {
		t.Fatalf("a saturated limit: %v, judged %d of %d, min %.2f; want none, all, >= 0.9", rep.Violations, rep.Judged, rep.Windows, rep.Min)
	}
	// Nothing admitted from 2 s to 3 s: found, unless that second is
	// disturbed.
	var gap []Admission
	for _, a := range good {
		if a.End.Before(t0.Add(2*time.Second)) || !a.End.Before(t0.Add(3*time.Second)) {
			gap = append(gap, a)
		}
	}
	rep = CheckRateFloor(iv, gap, nil, 0.5, t0, t0.Add(4*time.Second), time.Second, 100*time.Millisecond, 250*time.Millisecond)
	if len(rep.Violations) == 0 {
		t.Fatal("a second admitting nothing: no violation; want some")
	}
	rep = CheckRateFloor(iv, gap, []Span{{t0.Add(2 * time.Second), t0.Add(3 * time.Second)}}, 0.5, t0, t0.Add(4*time.Second), time.Second, 100*time.Millisecond, 250*time.Millisecond)
	if len(rep.Violations) > 0 || rep.Judged == rep.Windows {
		t.Fatalf("the silent second disturbed: %v, judged %d of %d; want none, not all", rep.Violations, rep.Judged, rep.Windows)
	}
}

func TestCheckRateJudged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := RateLimit{Interval: 50 * time.Millisecond, Burst: 5, Nodes: 1, Majority: 1}
	adms := []Admission{{Start: t0, End: t0.Add(time.Millisecond)}}
	// Admissions in the first second, a refusal at 1.5 s, nothing after 2 s,
	// and from 2 s an outage.
	l.Refused = []time.Time{t0.Add(1500 * time.Millisecond)}
	l.Outages = []Span{{t0.Add(2 * time.Second), t0.Add(4 * time.Second)}}
	rep := CheckRate(l, adms, t0, t0.Add(4*time.Second), time.Second, time.Second)
	if rep.Windows != 4 || rep.Judged != 2 || rep.Unreachable != 2 {
		t.Fatalf("windows %d, judged %d, unreachable %d; want 4, 2 (an admission, a refusal), 2 (the outage)", rep.Windows, rep.Judged, rep.Unreachable)
	}
}

func TestCheckRateFloorSlack(t *testing.T) {
	t0 := time.Unix(1000, 0)
	iv := 100 * time.Millisecond
	// Ideal 10 in a calm second; at a floor of 50%, 4 admitted is one
	// short of 5, within the slack; 3 is not.
	at := func(n int) []Admission {
		var out []Admission
		for i := range n {
			e := t0.Add(time.Duration(i) * 200 * time.Millisecond)
			out = append(out, Admission{Start: e, End: e})
		}
		return out
	}
	if rep := CheckRateFloor(iv, at(4), nil, 0.5, t0, t0.Add(time.Second), time.Second, time.Second, time.Second); len(rep.Violations) > 0 {
		t.Errorf("4 of an ideal 10 at 50%%: %v; want none (one admission of slack)", rep.Violations)
	}
	if rep := CheckRateFloor(iv, at(3), nil, 0.5, t0, t0.Add(time.Second), time.Second, time.Second, time.Second); len(rep.Violations) != 1 {
		t.Errorf("3 of an ideal 10 at 50%%: %d violations; want 1", len(rep.Violations))
	}
}
