package nemesis

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// A seed plans the same run every time, and another seed another run.
func TestPlanReplays(t *testing.T) {
	for _, s := range []string{Quorum, Single} {
		a := NewPlan(7, s, time.Minute, NoBias)
		b := NewPlan(7, s, time.Minute, NoBias)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two plans of seed 7 differ", s)
		}
		if c := NewPlan(8, s, time.Minute, NoBias); reflect.DeepEqual(a.Faults, c.Faults) {
			t.Fatalf("%s: seeds 7 and 8 plan the same faults", s)
		}
	}
}

// The rules every schedule keeps, over many seeds.
func TestPlanRules(t *testing.T) {
	kinds := map[Kind]bool{}
	for seed := range int64(200) {
		for _, s := range []string{Quorum, Single} {
			p := NewPlan(seed, s, time.Minute, NoBias)
			var clockEnd, stormy time.Duration
			for _, st := range p.Storms {
				stormy += st.To - st.From
			}
			if stormy > p.Duration*35/100 {
				t.Fatalf("seed %d %s: storms take %v of %v; want at most 35%%", seed, s, stormy, p.Duration)
			}
			inStorm := func(f Fault) bool {
				return slices.ContainsFunc(p.Storms, func(st Span) bool { return f.At >= st.From && f.At < st.To })
			}
			for i, f := range p.Faults {
				kinds[f.Kind] = true
				if !inStorm(f) && !Calm(s, f.Kind) && !f.Replica {
					t.Fatalf("seed %d %s: %v suspends a promise outside every storm %v", seed, s, f, p.Storms)
				}
				if f.Replica && (s != Single || inStorm(f) || f.Kind != KillRDB) {
					t.Fatalf("seed %d %s: %v: a replica's restart belongs to a calm stretch of the single strategy", seed, s, f)
				}
				if st := slices.IndexFunc(p.Storms, func(st Span) bool { return f.At >= st.From && f.At < st.To }); st >= 0 && f.At+f.For > p.Storms[st].To+stormSpill {
					t.Fatalf("seed %d %s: %v outlasts its storm %v", seed, s, f, p.Storms[st])
				}
				if f.N != i || f.At < 0 || f.At >= p.Duration {
					t.Fatalf("seed %d %s: fault %v out of place or time", seed, s, f)
				}
				if i > 0 && f.At < p.Faults[i-1].At {
					t.Fatalf("seed %d %s: schedule not in order at %v", seed, s, f)
				}
				switch f.Kind {
				case ClockForward, ClockBack:
					if f.At < clockEnd {
						t.Fatalf("seed %d %s: clock fault %v starts before the last one ends (%v)", seed, s, f, clockEnd)
					}
					clockEnd = f.At + f.For
					if f.Jump < time.Second || f.Jump > 5*time.Second {
						t.Fatalf("seed %d %s: jump %v out of 1-5 s", seed, s, f.Jump)
					}
				case KillRDB, KillAOF:
					for _, n := range f.Targets { // none for a replica's restart
						if p.AOF[n] != (f.Kind == KillAOF) {
							t.Fatalf("seed %d %s: %v hits server %d, whose mode (aof %t) it cannot restore", seed, s, f, n, p.AOF[n])
						}
					}
					if f.Kind == KillAOF && (f.Lose < time.Second || f.Lose > 2*time.Second) {
						t.Fatalf("seed %d %s: %v loses %v; want 1-2 s", seed, s, f, f.Lose)
					}
				case Failover:
					if s != Single {
						t.Fatalf("seed %d: failover planned for the quorum", seed)
					}
				case Pause, Latency, Timeout, ResetPeer:
					if f.For > 3*time.Second || !inStorm(f) && f.For < 200*time.Millisecond {
						t.Fatalf("seed %d %s: %v lasts %v; want 0.2-3 s", seed, s, f, f.For)
					}
				}
				if s == Single && len(f.Targets) > 1 {
					t.Fatalf("seed %d: single fault %v hits two servers", seed, f)
				}
			}
		}
	}
	for _, k := range Kinds {
		if !kinds[k] {
			t.Errorf("no seed of 200 planned a %s", k)
		}
	}
}

func TestPlanBias(t *testing.T) {
	p := NewPlan(1, Quorum, 12*time.Second, LoseMajority)
	if len(p.Faults) < 4 {
		t.Fatalf("lose-majority: %d faults in 12 s; want a burst every 2-2.5 s", len(p.Faults))
	}
	for _, f := range p.Faults {
		if f.Kind != KillEmpty || len(f.Targets) != 3 || f.For > 100*time.Millisecond {
			t.Fatalf("lose-majority: %v; want 3 servers killed and emptied, back within 100 ms", f)
		}
	}
	p = NewPlan(1, Single, 12*time.Second, PauseHolders)
	if len(p.Faults) < 7 {
		t.Fatalf("pause-holders: %d faults in 12 s; want about one a second", len(p.Faults))
	}
	for _, f := range p.Faults {
		if f.Kind != HolderPause {
			t.Fatalf("pause-holders: %v", f)
		}
	}
	for _, s := range []string{Quorum, Single} {
		p = NewPlan(1, s, 12*time.Second, ExpireQueued)
		if len(p.Faults) != 0 || len(p.Keys) != 4 || p.Permits != "" || p.RWLock != "" ||
			slices.ContainsFunc(p.Keys, func(k string) bool { return strings.HasPrefix(k, election.KeyPrefix) }) {
			t.Fatalf("expire-queued %s: faults %v, keys %q, permits %q, rwlock %q; want no fault, four lock keys and nothing else",
				s, p.Faults, p.Keys, p.Permits, p.RWLock)
		}
	}
}

var base = time.Unix(1_000_000, 0)

func sec(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

func ev(kind Kind, from, to float64, roles ...string) *Event {
	return &Event{Fault: Fault{Kind: kind, Jump: 2 * time.Second}, Start: sec(from), End: sec(to), Roles: roles}
}

// The windows say what the package doc's table says.
func TestWindows(t *testing.T) {
	plan := func(s string) *Plan { return &Plan{Strategy: s, TTL: time.Second} } // Linger 2 s
	type win struct {
		prop     safety.Property
		from, to float64
	}
	tests := []struct {
		name   string
		p      *Plan
		events []*Event
		want   []win
	}{{
		name:   "quorum: kills, pauses, toxics, holder pauses suspend nothing",
		p:      plan(Quorum),
		events: []*Event{ev(KillEmpty, 1, 2, "node"), ev(KillRDB, 3, 4, "node"), ev(Pause, 5, 6, "node"), ev(ResetPeer, 7, 8), ev(HolderPause, 9, 9)},
	}, {
		name:   "quorum: a clock fault suspends ME",
		p:      plan(Quorum),
		events: []*Event{ev(ClockForward, 1, 2, "node"), ev(ClockBack, 10, 11, "node")},
		want:   []win{{safety.MutualExclusion, 1, 4}, {safety.MutualExclusion, 10, 13}},
	}, {
		name:   "single: a kill of the master or a failover suspends ME; of the replica, nothing",
		p:      plan(Single),
		events: []*Event{ev(KillAOF, 1, 2, "master"), ev(KillEmpty, 5, 6, "replica"), ev(Failover, 8, 9, "master 0")},
		want:   []win{{safety.MutualExclusion, 1, 4}, {safety.MutualExclusion, 8, 11}},
	}, {
		name:   "single: a loss near a clock fault suspends ORDER and FENCE for the jump and a second",
		p:      plan(Single),
		events: []*Event{ev(ClockForward, 1, 2, "master"), ev(KillRDB, 4.5, 5, "master"), ev(KillRDB, 20, 21, "master")},
		want: []win{{safety.MutualExclusion, 1, 4}, {safety.MutualExclusion, 4.5, 7}, {safety.MutualExclusion, 20, 23},
			{safety.Order, 4.5, 8}, {safety.Fencing, 4.5, 8}},
	}, {
		name:   "single: a step back soon after a loss suspends ORDER and FENCE too",
		p:      plan(Single),
		events: []*Event{ev(KillEmpty, 1, 1.5, "master"), ev(ClockBack, 4, 5, "master"), ev(ClockBack, 20, 21, "master")},
		want: []win{{safety.MutualExclusion, 1, 3.5}, {safety.MutualExclusion, 4, 7}, {safety.MutualExclusion, 20, 23},
			{safety.Order, 1, 8}, {safety.Fencing, 1, 8}},
	}, {
		name:   "skipped faults suspend nothing",
		p:      plan(Single),
		events: []*Event{{Fault: Fault{Kind: Failover}, Start: sec(1), End: sec(1), Skipped: "replica busy"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []win
			for _, w := range Windows(tt.p, tt.events) {
				got = append(got, win{w.Property, w.From.Sub(base).Seconds(), w.To.Sub(base).Seconds()})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Windows() = %v; want %v", got, tt.want)
			}
		})
	}
}

// The readers' windows are the single strategy's ORDER windows, a loss
// near a clock fault, and none other: a loss alone opens none, since the
// first reader on the new server process raises the counter.
func TestReaderWindows(t *testing.T) {
	p := &Plan{Strategy: Single, TTL: time.Second}
	events := []*Event{ev(KillEmpty, 1, 2, "master"), ev(Failover, 8, 9, "master 0"),
		ev(ClockForward, 20, 21, "master"), ev(KillRDB, 22, 23, "master")}
	ws := readerWindows(Windows(p, events))
	if len(ws) != 1 || ws[0].Property != safety.Order || !ws[0].From.Equal(sec(22)) || !ws[0].To.Equal(sec(26)) {
		t.Fatalf("readerWindows() = %v; want one ORDER window from 22 s to 26 s (the loss near the clock fault)", ws)
	}
}

// The schedule leaves every property judged most of the time: with each
// fault run as planned and every kill of the single strategy, but the
// replica's restarts, taken to hit the master (the most it can suspend),
// the windows cover well under half of the run, in the short mode and in
// a soak alike. The run itself measures the share on the faults as they
// ran (Result.Judged; TestNemesis holds it to MinJudged).
func TestPlanJudges(t *testing.T) {
	for _, d := range []time.Duration{shortDuration, 10 * time.Minute} {
		for _, s := range []string{Quorum, Single} {
			worst := map[safety.Property]float64{}
			for seed := range int64(100) {
				judged := plannedJudged(NewPlan(seed, s, d, NoBias))
				for prop, j := range judged {
					if w, ok := worst[prop]; !ok || j < w {
						worst[prop] = j
					}
				}
			}
			for prop := range worst {
				// The floor's windows, 6 s wide, are judged when 200 ms
				// of them are calm. A planned short run mostly leaves
				// nearly all of them so, but a storm at its start can
				// leave a third: 2 of 1000 seeds of the single strategy
				// judge the floor in less than half of a short run (36%
				// at least), and 1 of the quorum's (43%: its calm gaps
				// under floorGap in a storm are not judged); HANDLE
				// falls under half in 6 of the single strategy's.
				// TestNemesis draws a fresh seed again when its plans
				// judge any property in less than planMargin.
				want := 0.55
				if prop == safety.Handle {
					// HANDLE's windows add a clock forward's jump, on the
					// single strategy, to ME's: 53% at least.
					want = MinJudged
				}
				if prop == safety.RateFloor {
					want = MinJudged
					if d == shortDuration {
						want = 0.33
					}
				}
				if worst[prop] < want {
					t.Errorf("%s, %v runs: %s judged in as little as %.0f%% of a planned run; want %.0f%% or more", s, d, prop, 100*worst[prop], 100*want)
				}
			}
			t.Logf("%s, %v runs: least judged share over 100 seeds: ME %.0f%%, ORDER %.0f%%, FENCE %.0f%%, RATE floor %.0f%%, HANDLE %.0f%%", s, d,
				100*worst[safety.MutualExclusion], 100*worst[safety.Order], 100*worst[safety.Fencing], 100*worst[safety.RateFloor], 100*worst[safety.Handle])
		}
	}
}

// plannedJudged returns the share of p's run in which each property is
// judged, with each fault run as planned and every kill of the single
// strategy, but the replica's restarts, taken to hit the master (the most
// it can suspend). RATE, which counts the faults in its bound and judges
// every window a run admits in, is left out.
func plannedJudged(p *Plan) map[safety.Property]float64 {
	var events []*Event
	for _, f := range p.Faults {
		e := &Event{Fault: f, Start: base.Add(f.At), End: base.Add(f.At + f.For + time.Duration(len(f.Targets))*f.Stagger)}
		if p.Strategy == Single {
			e.Roles = []string{"master"}
			if f.Replica {
				e.Roles = []string{"replica"}
			}
		}
		events = append(events, e)
	}
	end := base.Add(p.Duration)
	ws := Windows(p, events)
	judged := map[safety.Property]float64{}
	for _, prop := range Properties {
		judged[prop] = Judged(ws, prop, base, end)
	}
	// HANDLE has ME's windows and a clock forward's jump.
	judged[safety.Handle] = Judged(handleWindows(p, events, ws), safety.Handle, base, end)
	// The floor judges where no fault stands in a limit's way, and
	// counts a pause or a kill on the master only: with the roles as
	// they fall (server 0 the master until a failover swaps them), not
	// all taken to be the master's as above.
	fl := safety.CheckRateFloor(time.Millisecond, nil, floorDisturbed(p, plannedRoles(p, events), nil), 0, base, end, floorWidth, floorStep, floorCalm)
	judged[safety.RateFloor] = share(fl.Judged, fl.Windows)
	delete(judged, safety.Rate)
	return judged
}

// plannedRoles returns a single strategy's events with the role each
// fault's target has as the plan runs: server 0 is the master until a
// failover promotes the other; a kill of the replica hits whichever is
// not the master. The quorum's events are returned as they are.
func plannedRoles(p *Plan, events []*Event) []*Event {
	if p.Strategy != Single {
		return events
	}
	out := make([]*Event, len(events))
	master := 0
	for i, e := range events {
		c := *e
		switch {
		case e.Kind == Failover:
			c.Roles = []string{"master " + strconv.Itoa(master)}
			master = 1 - master
		case e.Replica:
			c.Roles = []string{"replica"}
		case len(e.Targets) > 0 && e.Targets[0] == master:
			c.Roles = []string{"master"}
		default:
			c.Roles = []string{"replica"}
		}
		out[i] = &c
	}
	return out
}

// TestUnderplanned: a fresh seed of TestNemesis is drawn again when its
// plans leave a property judged in less than planMargin of a short run:
// seed 38 plans the single strategy's RATE floor in 36% of it, 85 the
// quorum's in 43%, 322 the single strategy's HANDLE in 46%; seed 1 plans
// every property judged in most of the run.
func TestUnderplanned(t *testing.T) {
	for _, c := range []struct {
		seed int64
		want string
	}{{38, "single RATE floor"}, {85, "quorum RATE floor"}, {322, "single HANDLE"}, {1, ""}} {
		got := underplanned(c.seed, shortDuration)
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("underplanned(%d) = %q; want %q", c.seed, got, c.want)
		}
	}
}
