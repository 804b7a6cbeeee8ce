package safety

import (
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Property names a promise a lock makes to the resource it protects.
type Property string

const (
	// MutualExclusion: no two holders of a key valid at once, each by its
	// own clock (Report.Overlaps).
	MutualExclusion Property = "ME"
	// Order: an acquisition that starts after another one of its key was
	// granted gets a strictly larger token, and no two holders of a key
	// share a token (CheckOrder).
	Order Property = "ORDER"
	// Fencing: no stale write accepted, and the register linearizable
	// (Report.StaleAccepted, Report.Linearizable).
	Fencing Property = "FENCE"
)

// Violation is one broken promise, dated by the grant that made it one,
// so that a fault test can tell the violations a fault excuses from those
// it does not:
//
//   - MutualExclusion: the later of the two overlapping leases' grants;
//   - Order: the grant of the acquisition whose token is too small;
//   - Fencing: the grant of the newer holder that a stale write followed
//     (the later of the two holders' first grants). A register found not
//     linearizable is a Fencing violation with a zero At: no window
//     excuses it.
type Violation struct {
	Property Property
	At       time.Time
	Detail   string
}

func (v Violation) String() string {
	if v.At.IsZero() {
		return string(v.Property) + ": " + v.Detail
	}
	return string(v.Property) + " at " + Stamp(v.At) + ": " + v.Detail
}

// Acquisition is one acquisition of a lock as its caller saw it: asked for
// at Start, granted at Granted with Token (a zero Granted: not granted).
type Acquisition struct {
	Holder  string
	Start   time.Time
	Granted time.Time
	Token   fence.Token
}

// CheckOrder returns the Order violations among the acquisitions of one
// key: every granted acquisition that started after another one was
// granted and whose token is not larger than that one's (one violation
// each, named with the largest such token), and every holder whose token
// another holder got before it.
func CheckOrder(acqs []Acquisition) []Violation {
	var granted []Acquisition
	for _, a := range acqs {
		if !a.Granted.IsZero() {
			granted = append(granted, a)
		}
	}
	byGrant := slices.Clone(granted)
	slices.SortStableFunc(byGrant, func(a, b Acquisition) int { return a.Granted.Compare(b.Granted) })
	byStart := slices.Clone(granted)
	slices.SortStableFunc(byStart, func(a, b Acquisition) int { return a.Start.Compare(b.Start) })

	var out []Violation
	best, i := -1, 0 // best: index in byGrant of the largest token granted before the current start
	for _, b := range byStart {
		for ; i < len(byGrant) && byGrant[i].Granted.Before(b.Start); i++ {
			if best < 0 || byGrant[i].Token > byGrant[best].Token {
				best = i
			}
		}
		if best >= 0 && b.Token <= byGrant[best].Token {
			a := byGrant[best]
			out = append(out, Violation{Property: Order, At: b.Granted, Detail: fmt.Sprintf(
				"token order: %s started at %s, after %s was granted token %s at %s, and got token %s",
				b.Holder, Stamp(b.Start), a.Holder, a.Token, Stamp(a.Granted), b.Token)})
		}
	}

	first := map[fence.Token]Acquisition{}
	for _, a := range byGrant {
		if f, ok := first[a.Token]; ok && f.Holder != a.Holder {
			out = append(out, Violation{Property: Order, At: a.Granted, Detail: fmt.Sprintf(
				"duplicate token: %s granted token %s at %s, already granted to %s at %s",
				a.Holder, a.Token, Stamp(a.Granted), f.Holder, Stamp(f.Granted))})
			continue
		}
		if _, ok := first[a.Token]; !ok {
			first[a.Token] = a
		}
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return a.At.Compare(b.At) })
	return out
}

// Window is a stretch of time, From to To inclusive, in which a promise is
// not made, and why: a fault the promise does not cover.
type Window struct {
	Property Property
	From, To time.Time
	Why      string
}

// Covers reports whether w excuses v: same property, and v dated within w.
func (w Window) Covers(v Violation) bool {
	return w.Property == v.Property && !v.At.IsZero() && !v.At.Before(w.From) && !v.At.After(w.To)
}

// Excused is a violation and the window that excuses it.
type Excused struct {
	Violation
	By Window
}

// Classify splits vs into the violations that no window covers, promises
// broken, and those one does, each with the first window that covers it.
func Classify(vs []Violation, ws []Window) (broken []Violation, excused []Excused) {
	for _, v := range vs {
		i := slices.IndexFunc(ws, func(w Window) bool { return w.Covers(v) })
		if i < 0 {
			broken = append(broken, v)
			continue
		}
		excused = append(excused, Excused{Violation: v, By: ws[i]})
	}
	return broken, excused
}
