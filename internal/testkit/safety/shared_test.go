package safety

import (
	"testing"

	"github.com/dlockgo/dlock/fence"
)

func TestCheckShared(t *testing.T) {
	r := func(holder string, from, until int) Hold { return Hold{holder, true, at(from), at(until)} }
	w := func(holder string, from, until int) Hold { return Hold{holder, false, at(from), at(until)} }
	for _, tc := range []struct {
		name  string
		holds []Hold
		want  []int // the dates, in ms, of the violations expected
	}{
		{"none", nil, nil},
		{"readers share", []Hold{r("a", 0, 10), r("b", 5, 20), r("c", 6, 7)}, nil},
		{"writers in turn", []Hold{w("a", 0, 10), w("b", 10, 20), r("c", 20, 30), w("d", 30, 40)}, nil},
		{"writer over a reader", []Hold{r("a", 0, 10), w("b", 9, 20)}, []int{9}},
		{"reader over a writer", []Hold{w("a", 0, 10), r("b", 5, 6)}, []int{5}},
		{"two writers", []Hold{w("a", 0, 10), w("b", 3, 4)}, []int{3}},
		{"a writer over two readers", []Hold{r("a", 0, 10), r("b", 1, 10), w("c", 2, 3)}, []int{2, 2}},
		{"a holder with itself", []Hold{w("a", 0, 10), w("a", 5, 20)}, nil},
		{"out of order", []Hold{w("b", 9, 20), r("a", 0, 10)}, []int{9}},
	} {
		vs := CheckShared(tc.holds)
		if len(vs) != len(tc.want) {
			t.Errorf("%s: %v; want %d violations", tc.name, vs, len(tc.want))
			continue
		}
		for i, v := range vs {
			if v.Property != MutualExclusion || !v.At.Equal(at(tc.want[i])) {
				t.Errorf("%s: violation %d = %v; want ME at %d ms", tc.name, i, v, tc.want[i])
			}
		}
	}
}

func TestCheckSharedOrder(t *testing.T) {
	// acq: asked for at start ms, granted at granted ms (-1: not granted)
	// with token.
	acq := func(holder string, start, granted int, token uint64) Acquisition {
		a := Acquisition{Holder: holder, Start: at(start), Token: fence.Token(token)}
		if granted >= 0 {
			a.Granted = at(granted)
		}
		return a
	}
	for _, tc := range []struct {
		name             string
		writers, readers []Acquisition
		want             []int // the dates, in ms, of the violations expected
	}{
		{"none", nil, nil, nil},
		{"readers share the last writer's", []Acquisition{acq("w1", 0, 1, 10), acq("w2", 20, 21, 11)},
			[]Acquisition{acq("r1", 5, 6, 10), acq("r2", 7, 8, 10), acq("r3", 22, 30, 11)}, nil},
		{"a reader before any writer", []Acquisition{acq("w", 5, 6, 11)}, []Acquisition{acq("r", 0, 1, 10)}, nil},
		{"a reader behind the last writer", []Acquisition{acq("w1", 0, 1, 10), acq("w2", 2, 3, 11)},
			[]Acquisition{acq("r", 5, 6, 10)}, []int{6}},
		{"a reader behind another reader", nil, []Acquisition{acq("r1", 0, 1, 10), acq("r2", 5, 6, 9)}, []int{6}},
		// r2 drew 9 at 6 (a raise on a counter restored below r1's 10);
		// r3 joins it at 40: dated by the draw, as is r2's.
		{"a reader joins a token drawn behind", nil,
			[]Acquisition{acq("r1", 0, 1, 10), acq("r2", 5, 6, 9), acq("r3", 39, 40, 9)}, []int{6, 6}},
		// 9 drawn at 2, before r2's 10: its return at 40 is a draw of its
		// own, after 10's grant.
		{"a token drawn behind again", nil,
			[]Acquisition{acq("r1", 1, 2, 9), acq("r2", 5, 6, 10), acq("r3", 39, 40, 9)}, []int{40}},
		{"a writer at a reader's token", []Acquisition{acq("w", 5, 6, 10)}, []Acquisition{acq("r", 0, 1, 10)}, []int{6}},
		{"a writer below a reader's token", []Acquisition{acq("w", 5, 6, 9)}, []Acquisition{acq("r", 0, 1, 10)}, []int{6}},
		{"concurrent asks are not ordered", []Acquisition{acq("w", 0, 6, 12)}, []Acquisition{acq("r", 1, 2, 10)}, nil},
		{"not granted", []Acquisition{acq("w", 0, 1, 10)}, []Acquisition{acq("r", 5, -1, 0)}, nil},
		{"writers among themselves are CheckOrder's", []Acquisition{acq("w1", 0, 1, 10), acq("w2", 5, 6, 9)}, nil, nil},
	} {
		vs := CheckSharedOrder(tc.writers, tc.readers)
		if len(vs) != len(tc.want) {
			t.Errorf("%s: %v; want %d violations", tc.name, vs, len(tc.want))
			continue
		}
		for i, v := range vs {
			if v.Property != Order || !v.At.Equal(at(tc.want[i])) {
				t.Errorf("%s: violation %d = %v; want ORDER at %d ms", tc.name, i, v, tc.want[i])
			}
		}
	}
}

func TestHolds(t *testing.T) {
	h := History{
		Grants:   []Grant{{Holder: "a", At: at(0), Until: at(10)}, {Holder: "a", At: at(8), Until: at(18)}, {Holder: "b", At: at(20), Until: at(30)}},
		Releases: []Release{{Holder: "a", At: at(15)}},
	}
	got := h.Holds(true)
	want := []Hold{{"a", true, at(0), at(15)}, {"b", true, at(20), at(30)}}
	if len(got) != len(want) {
		t.Fatalf("Holds = %v; want %v", got, want)
	}
	for i := range want {
		if got[i].Holder != want[i].Holder || got[i].Shared != want[i].Shared || !got[i].At.Equal(want[i].At) || !got[i].Until.Equal(want[i].Until) {
			t.Errorf("hold %d = %v; want %v", i, got[i], want[i])
		}
	}
}
