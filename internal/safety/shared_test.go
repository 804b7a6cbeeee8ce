package safety

import "testing"

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
