package safety

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
)

func acq(holder string, start, granted int, token fence.Token) Acquisition {
	a := Acquisition{Holder: holder, Start: at(start), Token: token}
	if granted >= 0 {
		a.Granted = at(granted)
	}
	return a
}

func TestCheckOrder(t *testing.T) {
	tests := []struct {
		name string
		acqs []Acquisition
		want []string // holder whose token broke the order, and the kind, per violation
	}{{
		name: "sequential, rising",
		acqs: []Acquisition{acq("a", 0, 10, 1), acq("b", 20, 30, 2), acq("c", 40, 50, 3)},
	}, {
		name: "concurrent acquisitions may take either order",
		acqs: []Acquisition{acq("a", 0, 30, 2), acq("b", 10, 20, 1)},
	}, {
		name: "waiting since before the grant: no order owed",
		acqs: []Acquisition{acq("a", 5, 10, 5), acq("b", 0, 40, 4)},
	}, {
		name: "started after a grant, smaller token",
		acqs: []Acquisition{acq("a", 0, 10, 5), acq("b", 20, 30, 4)},
		want: []string{"b token order"},
	}, {
		name: "started after a grant, equal token",
		acqs: []Acquisition{acq("a", 0, 10, 5), acq("b", 20, 30, 5)},
		want: []string{"b duplicate token", "b token order"},
	}, {
		name: "compared with the largest token granted before, not the last",
		acqs: []Acquisition{acq("a", 0, 10, 9), acq("b", 5, 15, 3), acq("c", 20, 30, 4)},
		want: []string{"c token order"},
	}, {
		name: "concurrent holders with one token",
		acqs: []Acquisition{acq("a", 0, 20, 7), acq("b", 5, 25, 7)},
		want: []string{"b duplicate token"},
	}, {
		name: "refused acquisitions are left out",
		acqs: []Acquisition{acq("a", 0, 10, 5), acq("b", 20, -1, 0), acq("c", 30, 40, 6)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := CheckOrder(tt.acqs)
			var got []string
			for _, v := range vs {
				if v.Property != Order || v.At.IsZero() {
					t.Errorf("violation %v: want an Order violation with a date", v)
				}
				kind := "token order"
				if strings.HasPrefix(v.Detail, "duplicate token") {
					kind = "duplicate token"
				}
				holder, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(v.Detail, "token order: "), "duplicate token: "), " ")
				got = append(got, holder+" "+kind)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("CheckOrder() = %q; want %q\n%v", got, tt.want, vs)
			}
		})
	}
}

// The violations Check lists are dated by the grant that made each one.
func TestCheckViolationsDated(t *testing.T) {
	h := History{
		Grants: []Grant{grant("a", 1, 0, 100), grant("b", 2, 50, 150), grant("c", 3, 200, 300)},
		Ops: []Op{
			write("c", 3, true, "c1", Accepted, 210, 212, 290),
			write("a", 3, true, "a1", Accepted, 220, 222, 0), // same token as c: the fence let it through
		},
	}
	r := Check(h)
	want := []string{"ME at " + Stamp(at(50)), "FENCE at " + Stamp(at(200))}
	var got []string
	for _, v := range r.Violations {
		got = append(got, string(v.Property)+" at "+Stamp(v.At))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Violations = %q; want %q", got, want)
	}

	unfenced := History{
		Grants: []Grant{grant("a", 0, 0, 100), grant("b", 0, 150, 250)},
		Ops:    []Op{write("a", 0, false, "a1", Accepted, 300, 301, 0)},
	}
	if vs := Check(unfenced).Violations; len(vs) != 1 || vs[0].Property != Fencing || !vs[0].At.Equal(at(150)) {
		t.Fatalf("unfenced superseded write: Violations = %v; want one FENCE at b's grant", vs)
	}

	bad := History{Ops: []Op{write("a", 1, true, "a1", Accepted, 0, 10, 90), read("", 0, 20, 30)}}
	vs := Check(bad).Violations
	if len(vs) != 1 || vs[0].Property != Fencing || !vs[0].At.IsZero() {
		t.Fatalf("non-linearizable register: Violations = %v; want one undated FENCE", vs)
	}
}

func TestClassify(t *testing.T) {
	me := Violation{Property: MutualExclusion, At: at(100), Detail: "x"}
	order := Violation{Property: Order, At: at(100), Detail: "y"}
	lin := Violation{Property: Fencing, Detail: "not linearizable"}
	late := Violation{Property: MutualExclusion, At: at(301), Detail: "z"}
	ws := []Window{
		{Property: MutualExclusion, From: at(50), To: at(100), Why: "clock jump"},
		{Property: MutualExclusion, From: at(200), To: at(300), Why: "kill"},
		{Property: Fencing, From: time.Time{}, To: at(1000), Why: "everything"},
	}
	broken, excused := Classify([]Violation{me, order, lin, late}, ws)
	if len(excused) != 1 || excused[0].Violation != me || excused[0].By.Why != "clock jump" {
		t.Fatalf("excused = %v; want the ME violation, by the clock jump (its window's end is inclusive)", excused)
	}
	if want := []Violation{order, lin, late}; !slices.Equal(broken, want) {
		t.Fatalf("broken = %v; want %v (another property's window, an undated violation, one past the window)", broken, want)
	}
}

// newerAcceptedRef is the plain quadratic definition the index answers.
func newerAcceptedRef(ops []Op, w Op, start map[string]time.Time) bool {
	for _, v := range ops {
		if v.Kind != Write || !v.Fenced || v.Outcome != Accepted || !v.Return.Before(w.Call) {
			continue
		}
		if v.Token > w.Token || (v.Holder != w.Holder && start[v.Holder].After(start[w.Holder])) {
			return true
		}
	}
	return false
}

// The index finds exactly the writes the quadratic definition does, on
// random histories (broken fences included, so that both answers occur).
func TestAcceptedIndexMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		start := map[string]time.Time{}
		var ops []Op
		holders := 2 + rng.IntN(5)
		for h := range holders {
			start[fmt.Sprint(h)] = at(rng.IntN(100))
		}
		for range 1 + rng.IntN(30) {
			h := fmt.Sprint(rng.IntN(holders))
			call := rng.IntN(200)
			o := Accepted
			if rng.IntN(4) == 0 {
				o = Refused
			}
			ops = append(ops, write(h, fence.Token(rng.IntN(6)), rng.IntN(5) > 0, "v", o, call, call+rng.IntN(10), 0))
		}
		x := newAcceptedIndex(ops, start)
		for _, w := range ops {
			_, got := x.find(w)
			if want := newerAcceptedRef(ops, w, start); got != want {
				t.Fatalf("round %d: find(%+v) = %t; want %t", round, w, got, want)
			}
		}
	}
}
