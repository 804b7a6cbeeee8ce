package nemesis

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/stretchr/testify/require"
)

// TestStarvationObserve: a wake on time, or late by less than starveLate,
// is no stretch; a late one is, from when it was due to floorSettle past
// the wake, and overlapping ones merge.
func TestStarvationObserve(t *testing.T) {
	s := watchStarvation()
	base := time.Now().Add(time.Hour) // after any stretch the watcher itself may find
	s.observe(base, base.Add(starveTick))
	s.observe(base, base.Add(starveTick+starveLate-time.Millisecond))
	s.observe(base, base.Add(starveTick+200*time.Millisecond))
	s.observe(base.Add(250*time.Millisecond), base.Add(300*time.Millisecond+starveTick))
	var got []time.Duration
	for _, sp := range s.close() {
		if sp.From.Before(base) {
			continue
		}
		got = append(got, sp.From.Sub(base), sp.To.Sub(base))
	}
	require.Equal(t, []time.Duration{starveTick, 300*time.Millisecond + starveTick + floorSettle}, got,
		"the two late wakes' stretches, merged; the wakes on time none")
}

// TestFloorGap: on the quorum, two stretches with two nodes killed are
// one for the floor when the calm between them is shorter than floorGap,
// and two when it is longer; on the single strategy a gap is judged
// whatever its length.
func TestFloorGap(t *testing.T) {
	base := time.Now()
	kill := func(at, to time.Duration, targets ...int) *Event {
		return &Event{Fault: Fault{Kind: KillRDB, Targets: targets}, Start: base.Add(at), End: base.Add(to), Roles: []string{"master"}}
	}
	spans := func(p *Plan, events ...*Event) (out []time.Duration) {
		for _, s := range floorDisturbed(p, events, nil) {
			out = append(out, s.From.Sub(base), s.To.Sub(base))
		}
		return out
	}
	sec := time.Second
	quorum, single := &Plan{Strategy: Quorum, AOF: make([]bool, 5)}, &Plan{Strategy: Single, AOF: make([]bool, 2)}
	gap := floorGap - floorSettle - time.Millisecond // the calm between the two
	require.Equal(t, []time.Duration{0, 2*sec + gap + floorSettle},
		spans(quorum, kill(0, sec, 0, 1), kill(sec+floorSettle+gap, 2*sec+gap, 2, 3)), "a gap under floorGap, joined")
	gap = floorGap + time.Millisecond
	require.Equal(t, []time.Duration{0, sec + floorSettle, sec + floorSettle + gap, 2*sec + gap + floorSettle},
		spans(quorum, kill(0, sec, 0, 1), kill(sec+floorSettle+gap, 2*sec+gap, 2, 3)), "a gap of floorGap or more, judged")
	gap = 2 * floorSettle
	require.Equal(t, []time.Duration{0, sec + floorSettle, sec + floorSettle + gap, 2*sec + gap + floorSettle},
		spans(single, kill(0, sec, 0), kill(sec+floorSettle+gap, 2*sec+gap, 0)), "the single strategy's short gap, judged")
}

// TestFloorReplicaKill: on the single strategy a kill planned for the
// replica that met the master (a failover swapped the roles before it ran)
// disturbs the floor, as any kill of the master does; one that met the
// replica does not.
func TestFloorReplicaKill(t *testing.T) {
	base := time.Now()
	p := &Plan{Strategy: Single, AOF: make([]bool, 2)}
	kill := func(role string) *Event {
		return &Event{Fault: Fault{Kind: KillRDB, Replica: true}, Start: base, End: base.Add(time.Second), Roles: []string{role}}
	}
	require.Equal(t, []safety.Span{{From: base, To: base.Add(time.Second + floorSettle)}}, floorDisturbed(p, []*Event{kill("master")}, nil),
		"a replica's kill that met the master")
	require.Empty(t, floorDisturbed(p, []*Event{kill("replica")}, nil), "a replica's kill that met the replica")
}
