package safety

import (
	"fmt"
	"slices"
	"time"
)

// Hold is one lease of a read-write lock as its holder saw it: held from
// At until Until by its holder's own clock (the end of its validity, or
// its release when that came first), Shared for a reader's lease,
// exclusive for a writer's.
type Hold struct {
	Holder string
	Shared bool
	At     time.Time
	Until  time.Time
}

// CheckShared returns the MutualExclusion violations among the holds of
// one read-write lock: every pair of holds of distinct holders whose
// intervals overlap while at least one of them is exclusive (a writer
// with anyone else). Holds that share overlap freely. Each violation is
// dated by the later of the two grants.
func CheckShared(holds []Hold) []Violation {
	hs := slices.Clone(holds)
	slices.SortFunc(hs, func(a, b Hold) int { return a.At.Compare(b.At) })
	var vs []Violation
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if !b.At.Before(a.Until) {
				break // sorted by start: no later hold overlaps a either
			}
			if a.Shared && b.Shared || a.Holder == b.Holder {
				continue
			}
			vs = append(vs, Violation{Property: MutualExclusion, At: b.At,
				Detail: fmt.Sprintf("overlap: %s (%s) valid until %s, %s (%s) granted at %s",
					a.Holder, kindOf(a), stamp(a.Until), b.Holder, kindOf(b), stamp(b.At))})
		}
	}
	return vs
}

func kindOf(h Hold) string {
	if h.Shared {
		return "shared"
	}
	return "exclusive"
}
