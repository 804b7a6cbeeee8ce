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
					a.Holder, kindOf(a), Stamp(a.Until), b.Holder, kindOf(b), Stamp(b.At))})
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

// Holds returns the leases of h as holds of a read-write lock, Shared as
// given, each over the interval Check gives it: from its first grant to
// the end of validity last seen, or its release if that came first. A
// Resource that records only the readers' grants, renewals and releases
// thus yields their holds, and one that records the writers' theirs.
func (h History) Holds(shared bool) []Hold {
	ivs := leases(h)
	out := make([]Hold, len(ivs))
	for i, iv := range ivs {
		out[i] = Hold{Holder: iv.holder, Shared: shared, At: iv.from, Until: iv.to}
	}
	return out
}

// sharedAcq is an acquisition of a read-write lock, shared (a reader's) or
// not.
type sharedAcq struct {
	Acquisition
	shared bool
}

// CheckSharedOrder returns the Order violations of the readers' tokens of
// one read-write lock, whose writers' tokens among themselves are
// CheckOrder's: every reader that started after another acquisition,
// writer's or reader's, was granted, and got a smaller token than that
// one (a reader's token is the last writer's, and does not go back); and
// every writer that started after a reader was granted, and got a token
// not larger than the reader's. Each is dated by the moment the token too
// small was drawn: a writer's grant; for a reader, the first grant of its
// token after the larger one's, since readers with no writer between them
// share the token the first of them raised the counter to, and a reader
// that joins them later carries a token drawn at that raise (a raise
// inside a fault's window is excused with the readers who share it).
func CheckSharedOrder(writers, readers []Acquisition) []Violation {
	var all []sharedAcq
	for _, a := range writers {
		if !a.Granted.IsZero() {
			all = append(all, sharedAcq{a, false})
		}
	}
	for _, a := range readers {
		if !a.Granted.IsZero() {
			all = append(all, sharedAcq{a, true})
		}
	}
	byGrant := slices.Clone(all)
	slices.SortStableFunc(byGrant, func(a, b sharedAcq) int { return a.Granted.Compare(b.Granted) })
	byStart := slices.Clone(all)
	slices.SortStableFunc(byStart, func(a, b sharedAcq) int { return a.Start.Compare(b.Start) })

	var out []Violation
	// best, bestReader: indexes in byGrant of the largest token granted
	// before the current start, of anyone and of a reader.
	best, bestReader, i := -1, -1, 0
	for _, b := range byStart {
		for ; i < len(byGrant) && byGrant[i].Granted.Before(b.Start); i++ {
			if best < 0 || byGrant[i].Token > byGrant[best].Token {
				best = i
			}
			if byGrant[i].shared && (bestReader < 0 || byGrant[i].Token > byGrant[bestReader].Token) {
				bestReader = i
			}
		}
		var a sharedAcq
		switch {
		case b.shared && best >= 0 && b.Token < byGrant[best].Token:
			a = byGrant[best]
		case !b.shared && bestReader >= 0 && b.Token <= byGrant[bestReader].Token:
			a = byGrant[bestReader]
		default:
			continue
		}
		out = append(out, Violation{Property: Order, At: drawn(byGrant, b, a), Detail: fmt.Sprintf(
			"token order: %s (%s) started at %s, after %s (%s) was granted token %s at %s, and got token %s",
			b.Holder, kindOf(Hold{Shared: b.shared}), Stamp(b.Start), a.Holder, kindOf(Hold{Shared: a.shared}),
			a.Token, Stamp(a.Granted), b.Token)})
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return a.At.Compare(b.At) })
	return out
}

// drawn dates the order violation of b, whose token is below a's: b's
// grant for a writer; for a reader, the first grant of a reader with b's
// token after a's grant (byGrant is sorted by grant).
func drawn(byGrant []sharedAcq, b, a sharedAcq) time.Time {
	if !b.shared {
		return b.Granted
	}
	for _, x := range byGrant {
		if x.shared && x.Token == b.Token && x.Granted.After(a.Granted) {
			return x.Granted
		}
	}
	return b.Granted
}
