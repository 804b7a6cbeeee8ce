package safety

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
)

var t0 = time.Unix(1_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func grant(holder string, token fence.Token, from, until int) Grant {
	return Grant{Holder: holder, Token: token, At: at(from), Until: at(until)}
}

// write is a write by holder during [call, ret]; validUntil 0 means the
// holder's lease had ended by its own clock.
func write(holder string, token fence.Token, fenced bool, value string, o Outcome, call, ret, validUntil int) Op {
	op := Op{Kind: Write, Holder: holder, Token: token, Fenced: fenced, Value: value, Outcome: o,
		Call: at(call), Return: at(ret), ValidUntil: at(call)}
	if validUntil > 0 {
		op.ValidUntil = at(validUntil)
	}
	if o == Refused {
		op.Err = fence.ErrStale
	}
	return op
}

func read(value string, token fence.Token, call, ret int) Op {
	return Op{Kind: Read, Value: value, Token: token, Outcome: Accepted, Call: at(call), Return: at(ret)}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		h    History
		want Report // Notes are not compared
	}{{
		name: "clean handoff",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 150, 250)},
			Ops: []Op{
				write("a", 1, true, "a1", Accepted, 10, 12, 98),
				read("a1", 1, 20, 22),
				write("b", 2, true, "b1", Accepted, 160, 162, 240),
				read("b1", 2, 200, 202),
			},
		},
		want: Report{Holders: 2, Writes: 2, Linearizable: true},
	}, {
		name: "release ends the lease early",
		h: History{
			Grants:   []Grant{grant("a", 1, 0, 100), grant("b", 2, 50, 150)},
			Releases: []Release{{Holder: "a", At: at(40)}},
			Ops:      []Op{write("a", 1, true, "a1", Accepted, 10, 12, 98)},
		},
		want: Report{Holders: 2, Writes: 1, Linearizable: true},
	}, {
		name: "paused holder fenced out",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 150, 250)},
			Ops: []Op{
				write("b", 2, true, "b1", Accepted, 160, 162, 240),
				write("a", 1, true, "a1", Refused, 300, 301, 0),
				read("b1", 2, 310, 311),
			},
		},
		want: Report{Holders: 2, Writes: 2, FencedRefused: 1, Linearizable: true},
	}, {
		name: "server clock jump: overlap absorbed by the fence",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 50, 150)},
			Ops: []Op{
				write("b", 2, true, "b1", Accepted, 60, 62, 140),
				write("a", 1, true, "a1", Refused, 70, 72, 95),
			},
		},
		want: Report{Holders: 2, Writes: 2, Overlaps: 1, FencedRefused: 1, Linearizable: true},
	}, {
		name: "a write while valid stretches the lease into an overlap",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 150, 250)},
			Ops:    []Op{write("a", 1, true, "a1", Accepted, 90, 91, 190)}, // a extended
		},
		want: Report{Holders: 2, Writes: 1, Overlaps: 1, Linearizable: true},
	}, {
		// A lease resumed with more than a TTL left (a server whose
		// clock stepped back since the grant says so), then extended:
		// the Extend restarts it at a TTL, and it ends sooner.
		name: "an extend that shortens a lease ends it at its last look",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 500), grant("a", 1, 100, 250), grant("b", 2, 300, 400)},
		},
		want: Report{Holders: 2, Linearizable: true},
	}, {
		name: "a grant before the shortened end still overlaps",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 500), grant("a", 1, 100, 250), grant("b", 2, 200, 400)},
		},
		want: Report{Holders: 2, Overlaps: 1, Linearizable: true},
	}, {
		name: "a write's look before a later renewal's does not stretch the lease",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("a", 1, 50, 300), grant("b", 2, 350, 450)},
			Ops:    []Op{write("a", 1, true, "a1", Accepted, 40, 41, 400)},
		},
		want: Report{Holders: 2, Writes: 1, Linearizable: true},
	}, {
		name: "broken fence accepts a stale token",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 50, 150)},
			Ops: []Op{
				write("b", 2, true, "b1", Accepted, 60, 62, 140),
				write("a", 1, true, "a1", Accepted, 70, 72, 95),
			},
		},
		want: Report{Holders: 2, Writes: 2, Overlaps: 1, StaleAccepted: 1},
	}, {
		name: "a second holder with the same token: the fence cannot tell them apart",
		h: History{
			Grants: []Grant{grant("a", 2, 0, 100), grant("b", 2, 50, 150)},
			Ops: []Op{
				write("b", 2, true, "b1", Accepted, 60, 62, 140),
				write("a", 2, true, "a1", Accepted, 70, 72, 95),
			},
		},
		want: Report{Holders: 2, Writes: 2, Overlaps: 1, StaleAccepted: 1, Linearizable: true},
	}, {
		name: "concurrent fenced writes may land in either order",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 50, 150)},
			Ops: []Op{
				write("b", 2, true, "b1", Accepted, 60, 80, 140),
				write("a", 1, true, "a1", Accepted, 65, 75, 95),
				read("b1", 2, 90, 91),
			},
		},
		want: Report{Holders: 2, Writes: 2, Overlaps: 1, Linearizable: true},
	}, {
		name: "unfenced superseded holder writes twice over",
		h: History{
			Grants: []Grant{grant("a", 0, 0, 100), grant("b", 0, 150, 250)},
			Ops: []Op{
				write("b", 0, false, "b1", Accepted, 160, 162, 240),
				write("a", 0, false, "a1", Accepted, 300, 301, 0),
				read("a1", 0, 310, 311),
			},
		},
		want: Report{Holders: 2, Writes: 2, StaleAccepted: 1, UnfencedDoubleWrites: 1, Linearizable: true},
	}, {
		name: "read misses an acknowledged write",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100)},
			Ops: []Op{
				write("a", 1, true, "a1", Accepted, 0, 10, 90),
				read("", 0, 20, 30),
			},
		},
		want: Report{Holders: 1, Writes: 1},
	}, {
		name: "refused write that should have been accepted",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100)},
			Ops:    []Op{write("a", 1, true, "a1", Refused, 0, 10, 90)},
		},
		want: Report{Holders: 1, Writes: 1, FencedRefused: 1},
	}, {
		name: "write of unknown outcome may or may not land",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 150, 250)},
			Ops: []Op{
				write("a", 1, true, "a1", Accepted, 0, 10, 90),
				{Kind: Write, Holder: "b", Token: 2, Fenced: true, Value: "b1", Outcome: Unknown,
					Err: errors.New("i/o timeout"), Call: at(160), Return: at(170), ValidUntil: at(240)},
				read("a1", 1, 180, 181),
				read("b1", 2, 300, 301),
			},
		},
		want: Report{Holders: 2, Writes: 2, Linearizable: true},
	}, {
		name: "read goes back after a newer value",
		h: History{
			Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 150, 250)},
			Ops: []Op{
				write("a", 1, true, "a1", Accepted, 0, 10, 90),
				write("b", 2, true, "b1", Accepted, 160, 170, 240),
				read("b1", 2, 180, 181),
				read("a1", 1, 190, 191),
			},
		},
		want: Report{Holders: 2, Writes: 2},
	}, {
		name: "empty history",
		want: Report{Linearizable: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.h)
			notes := got.Notes
			got.Notes = nil
			if !equalReports(got, tt.want) {
				t.Fatalf("Check() = %v; want %v\nnotes: %q", got, tt.want, notes)
			}
			violations := got.Overlaps + got.StaleAccepted
			if !got.Linearizable {
				violations++
			}
			if violations > 0 && len(notes) == 0 {
				t.Fatalf("Check() = %v with no notes explaining it", got)
			}
		})
	}
}

func equalReports(a, b Report) bool {
	a.Notes, b.Notes = nil, nil
	return a.Holders == b.Holders && a.Writes == b.Writes && a.Overlaps == b.Overlaps &&
		a.StaleAccepted == b.StaleAccepted && a.UnfencedDoubleWrites == b.UnfencedDoubleWrites &&
		a.FencedRefused == b.FencedRefused && a.Linearizable == b.Linearizable
}

func TestReportString(t *testing.T) {
	r := Report{Holders: 3, Writes: 9, Overlaps: 1, StaleAccepted: 2, UnfencedDoubleWrites: 2,
		FencedRefused: 4, Linearizable: true, Notes: []string{"overlap: x"}}
	want := "holders=3 writes=9 overlaps=1 stale_accepted=2 unfenced_double_writes=2 fenced_refused=4 linearizable=true\n  overlap: x"
	if got := r.String(); got != want {
		t.Fatalf("String() = %q; want %q", got, want)
	}
	if r.Safe() {
		t.Fatalf("Safe() = true with 2 stale writes accepted")
	}
}

func TestCheckNotesAreBounded(t *testing.T) {
	var h History
	for i := range 10 {
		h.Grants = append(h.Grants, grant(string(rune('a'+i)), fence.Token(i+1), i, 1000))
	}
	r := Check(h)
	if r.Overlaps != 45 || len(r.Notes) != maxNotes || !strings.HasPrefix(r.Notes[0], "overlap: ") {
		t.Fatalf("Check() = %v; want 45 overlaps and %d notes", r, maxNotes)
	}
}
