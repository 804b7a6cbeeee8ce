package nemesis

import (
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// A stale Complete is dated by the later of the two grants it involves, so
// that the fault that explains it is the one whose window holds it. The
// case of seed 74749906590898949 (single, 45 s): a claim granted token H
// during a clock jump, the master then lost it (kill-aof), and a claim
// after the loss, under a clock still behind, got a smaller token L whose
// Complete the server accepted. Dated at H's grant, before the loss began,
// no window held it and it was reported broken; dated at L's grant, the
// window of the loss near the clock fault excuses it. A holder paused past
// its lease that completes after a newer claim is still a promise broken.
func TestCompletionDating(t *testing.T) {
	const key = "claims:" + queueName + "/job-1"
	claim := func(holder string, granted float64, token fence.Token) safety.Acquisition {
		return safety.Acquisition{Holder: holder, Start: sec(granted - 0.01), Granted: sec(granted), Token: token}
	}
	p := &Plan{Strategy: Single, TTL: time.Second}
	loss := []*Event{
		{Fault: Fault{N: 7, Kind: ClockForward, Targets: []int{0}, Jump: 2 * time.Second}, Start: sec(3.9), End: sec(4.6), Roles: []string{"master"}},
		{Fault: Fault{N: 8, Kind: KillAOF, Targets: []int{0}}, Start: sec(4.588), End: sec(4.9), Roles: []string{"master"}},
	}
	tests := []struct {
		name    string
		acqs    []safety.Acquisition
		done    completion
		events  []*Event
		at      float64
		excused string // the window's reason, or "" for a promise broken
	}{{
		name:    "larger token lost, smaller one granted after the loss",
		acqs:    []safety.Acquisition{claim("h", 4.235, 1_000_504), claim("l", 5.0, 1_000_000)},
		done:    completion{id: "job-1", token: 1_000_000, granted: sec(5.0), call: sec(5.3), accepted: true},
		events:  loss,
		at:      5.0,
		excused: "kill-aof [0] near #7",
	}, {
		name: "holder paused past its lease completes after a newer claim",
		acqs: []safety.Acquisition{claim("l", 1.0, 10), claim("h", 2.0, 11)},
		done: completion{id: "job-1", token: 10, granted: sec(1.0), call: sec(2.5), accepted: true},
		at:   2.0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wl := &workload{p: p, acqs: map[string][]safety.Acquisition{key: tt.acqs}, completions: []completion{tt.done}}
			stale := wl.checkCompletions()
			if len(stale) != 1 || stale[0].key != key {
				t.Fatalf("checkCompletions() = %v; want one violation of %s", stale, key)
			}
			v := stale[0].v
			if v.Property != safety.Fencing || !v.At.Equal(sec(tt.at)) {
				t.Fatalf("violation %v at %v; want FENCE at %v", v, v.At.Sub(base).Seconds(), tt.at)
			}
			broken, excused := safety.Classify([]safety.Violation{v}, Windows(p, tt.events))
			switch {
			case tt.excused == "" && len(broken) != 1:
				t.Errorf("excused by %v; want a promise broken", excused)
			case tt.excused != "" && (len(excused) != 1 || !strings.Contains(excused[0].By.Why, tt.excused)):
				t.Errorf("broken %v, excused %v; want excused by %q", broken, excused, tt.excused)
			}
		})
	}
}
