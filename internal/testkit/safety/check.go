package safety

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dlockgo/dlock/fence"
)

// CheckTimeout bounds the linearizability search of one Check; a search cut
// short counts as not linearizable, with a note saying so.
var CheckTimeout = 30 * time.Second

// maxNotes bounds the examples a Report keeps per kind of violation.
const maxNotes = 3

// Report is what Check found in a history.
type Report struct {
	// Holders is the number of distinct leases seen (by owner).
	Holders int
	// Writes is the number of write attempts.
	Writes int
	// Overlaps counts the pairs of leases of distinct holders whose
	// intervals [granted, valid until], each by its holder's own clock,
	// overlap: two holders who both believed they held the lock.
	Overlaps int
	// StaleAccepted counts the writes accepted from a stale holder: a
	// fenced write whose token is lower than one accepted before it began,
	// or that follows an accepted write of a holder granted after its own
	// (whatever the tokens say), or an unfenced write by a holder whose lease another holder had been
	// granted after it, before the write began.
	StaleAccepted int
	// UnfencedDoubleWrites is the part of StaleAccepted that carried no
	// fence: writes that a fenced resource might have refused.
	UnfencedDoubleWrites int
	// FencedRefused counts the fenced writes the fence refused.
	FencedRefused int
	// Linearizable reports whether the reads and writes are linearizable
	// as operations on a fenced register (see Check).
	Linearizable bool
	// Notes describes a few of the violations counted above.
	Notes []string
	// Violations lists every overlap and every stale write accepted, each
	// dated by the grant that made it one, and a non-linearizable register
	// as one undated Fencing violation; see Violation.
	Violations []Violation
}

// Safe reports whether no stale write was accepted and the register stayed
// linearizable. Overlaps alone do not make a history unsafe: they are what
// a fence is there to absorb.
func (r Report) Safe() bool { return r.StaleAccepted == 0 && r.Linearizable }

// String returns the counts on one line, then the notes, one per line.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "holders=%d writes=%d overlaps=%d stale_accepted=%d unfenced_double_writes=%d fenced_refused=%d linearizable=%t",
		r.Holders, r.Writes, r.Overlaps, r.StaleAccepted, r.UnfencedDoubleWrites, r.FencedRefused, r.Linearizable)
	for _, n := range r.Notes {
		b.WriteString("\n  ")
		b.WriteString(n)
	}
	return b.String()
}

type interval struct {
	holder   string
	token    fence.Token // of its first grant; 0 for a holder with none
	from, to time.Time
	seen     time.Time // when the holder saw the validity to: its last look
}

// saw records that the holder saw its lease valid until until at at: the
// interval ends at the validity of the holder's last look, whatever an
// earlier look said.
func (iv *interval) saw(at, until time.Time) {
	if at.Before(iv.seen) {
		return
	}
	if at.Equal(iv.seen) {
		until = Later(iv.to, until)
	}
	iv.seen, iv.to = at, until
}

// Check checks h. A lease's interval runs from its first grant to the
// end of validity its holder last saw, at a grant, a renewal (Held) or a
// write made while the lease was still valid by its holder's clock, or to
// its release if that came first, or to the sending of a break that ended
// it (see Break); a holder with no grant recorded starts at its first
// write. The last end seen, not the latest: an Extend restarts a lease's
// validity from its call, and may shorten it (a shorter TTL, or a lease
// resumed with more than a TTL left, which a server whose clock stepped
// back since the grant reports). A write of a broken holder accepted
// after its break returned is a stale write.
//
// Linearizability is checked against a sequential register holding a value
// and a token, initially empty and 0: a fenced write with token t succeeds,
// storing both, iff t > 0 and t >= the stored token, and is otherwise
// refused with no effect; an unfenced write always succeeds and stores the
// value only; a read returns both. A write of Unknown outcome may take
// effect at any time after its call, or never; a read of Unknown outcome is
// left out.
func Check(h History) Report {
	var rep Report
	ivs := leases(h)
	rep.Holders = len(ivs)

	slices.SortFunc(ivs, func(a, b interval) int { return a.from.Compare(b.from) })
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if !b.from.Before(a.to) {
				break // sorted by start: no later lease overlaps a either
			}
			if !b.to.After(b.from) {
				// Ended no later than it began: a lease broken before
				// its grant reached its holder (see endBroken), or
				// released so, held nothing beside a.
				continue
			}
			rep.Overlaps++
			note := fmt.Sprintf("overlap: %s (token %d) valid until %s, %s (token %d) granted at %s",
				a.holder, a.token, Stamp(a.to), b.holder, b.token, Stamp(b.from))
			rep.note(&rep.Overlaps, note)
			rep.Violations = append(rep.Violations, Violation{Property: MutualExclusion, At: b.from, Detail: note})
		}
	}

	start := map[string]time.Time{}
	for _, iv := range ivs {
		start[iv.holder] = iv.from
	}
	newer := newAcceptedIndex(h.Ops, start)
	for _, op := range h.Ops {
		if op.Kind != Write {
			continue
		}
		rep.Writes++
		switch {
		case op.Outcome == Refused && op.Fenced:
			rep.FencedRefused++
		case op.Outcome != Accepted:
		case op.Fenced:
			if v, ok := newer.find(op); ok {
				rep.StaleAccepted++
				note := fmt.Sprintf("stale write accepted: %s token %s at %s, after %s's token %s was accepted at %s",
					op.Holder, op.Token, Stamp(op.Call), v.Holder, v.Token, Stamp(v.Return))
				rep.note(&rep.StaleAccepted, note)
				rep.Violations = append(rep.Violations, Violation{Property: Fencing,
					At: Later(start[v.Holder], start[op.Holder]), Detail: note})
			}
		default:
			if g, ok := supersededBy(ivs, start[op.Holder], op); ok {
				rep.StaleAccepted++
				rep.UnfencedDoubleWrites++
				note := fmt.Sprintf("unfenced write by superseded holder: %s at %s, after %s was granted at %s",
					op.Holder, Stamp(op.Call), g.holder, Stamp(g.from))
				rep.note(&rep.UnfencedDoubleWrites, note)
				rep.Violations = append(rep.Violations, Violation{Property: Fencing, At: g.from, Detail: note})
			}
		}
	}

	for _, v := range brokenWrites(h) {
		rep.StaleAccepted++
		rep.note(&rep.StaleAccepted, v.Detail)
		rep.Violations = append(rep.Violations, v)
	}

	switch res := porcupine.CheckOperationsTimeout(registerModel, operations(h.Ops), CheckTimeout); res {
	case porcupine.Ok:
		rep.Linearizable = true
	case porcupine.Unknown:
		note := fmt.Sprintf("linearizability: search cut short after %v", CheckTimeout)
		rep.Notes = append(rep.Notes, note)
		rep.Violations = append(rep.Violations, Violation{Property: Fencing, Detail: note})
	default:
		note := "linearizability: no linear order of the reads and writes fits a fenced register"
		rep.Notes = append(rep.Notes, note)
		rep.Violations = append(rep.Violations, Violation{Property: Fencing, Detail: note})
	}
	return rep
}

// note keeps an example while the count it explains is small.
func (r *Report) note(count *int, s string) {
	if *count <= maxNotes {
		r.Notes = append(r.Notes, s)
	}
}

func leases(h History) []interval {
	byHolder := map[string]*interval{}
	granted := map[string]bool{}
	var order []string
	get := func(holder string, from time.Time) *interval {
		iv := byHolder[holder]
		if iv == nil {
			iv = &interval{holder: holder, from: from, to: from, seen: from}
			byHolder[holder] = iv
			order = append(order, holder)
		}
		return iv
	}
	for _, g := range h.Grants {
		granted[g.Holder] = true
		iv := get(g.Holder, g.At)
		if iv.token == 0 {
			iv.token = g.Token
		}
		iv.from = earliest(iv.from, g.At)
		iv.saw(g.At, g.Until)
	}
	for _, op := range h.Ops {
		if op.Kind != Write || op.Holder == "" {
			continue
		}
		iv := get(op.Holder, op.Call)
		if !granted[op.Holder] {
			iv.from = earliest(iv.from, op.Call)
		}
		// A write made after the lease ended by its holder's own clock
		// does not stretch the lease: that is the stale write itself.
		if op.ValidUntil.After(op.Call) {
			iv.saw(op.Call, op.ValidUntil)
		}
	}
	for _, rel := range h.Releases {
		if iv := byHolder[rel.Holder]; iv != nil {
			iv.to = Later(iv.from, earliest(iv.to, rel.At))
		}
	}
	endBroken(h.Breaks, byHolder)
	out := make([]interval, len(order))
	for i, holder := range order {
		out[i] = *byHolder[holder]
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// acceptedIndex finds, for a fenced write w, a fenced write accepted before
// w began with a larger token, or by another holder granted after w's: a
// fence that handed both the same token cannot tell them apart, and that
// is the failure to count. It answers in O(log n) from prefix maxima over
// the accepted writes in the order they returned, so that hour-long
// histories check in seconds.
type acceptedIndex struct {
	start map[string]time.Time
	ops   []Op  // accepted fenced writes, by Return
	tok   []int // tok[i]: index in ops of the largest token among ops[:i+1]
	// late[i]: index in ops of a write among ops[:i+1] whose holder was
	// granted last. When that holder is w's own, no other holder of the
	// prefix was granted after w's.
	late []int
}

func newAcceptedIndex(all []Op, start map[string]time.Time) *acceptedIndex {
	x := &acceptedIndex{start: start}
	for _, v := range all {
		if v.Kind == Write && v.Fenced && v.Outcome == Accepted {
			x.ops = append(x.ops, v)
		}
	}
	slices.SortStableFunc(x.ops, func(a, b Op) int { return a.Return.Compare(b.Return) })
	x.tok = make([]int, len(x.ops))
	x.late = make([]int, len(x.ops))
	t, l := -1, -1
	for i, v := range x.ops {
		if t < 0 || v.Token > x.ops[t].Token {
			t = i
		}
		if l < 0 || start[v.Holder].After(start[x.ops[l].Holder]) {
			l = i
		}
		x.tok[i], x.late[i] = t, l
	}
	return x
}

func (x *acceptedIndex) find(w Op) (Op, bool) {
	n, _ := slices.BinarySearchFunc(x.ops, w.Call, func(v Op, call time.Time) int {
		if v.Return.Before(call) {
			return -1
		}
		return 1
	})
	if n == 0 {
		return Op{}, false
	}
	if v := x.ops[x.tok[n-1]]; v.Token > w.Token {
		return v, true
	}
	// A write of no holder (a break's token shown to the fence) is judged
	// by its token alone.
	if v := x.ops[x.late[n-1]]; w.Holder != "" && v.Holder != w.Holder && x.start[v.Holder].After(x.start[w.Holder]) {
		return v, true
	}
	return Op{}, false
}

// supersededBy returns a lease of another holder granted after the
// writer's own, before w began. ivs is sorted by start, one per holder.
func supersededBy(ivs []interval, own time.Time, w Op) (interval, bool) {
	i, _ := slices.BinarySearchFunc(ivs, own, func(iv interval, t time.Time) int {
		if iv.from.After(t) {
			return 1
		}
		return -1
	})
	for ; i < len(ivs) && ivs[i].from.Before(w.Call); i++ {
		if ivs[i].holder != w.Holder {
			return ivs[i], true
		}
	}
	return interval{}, false
}

// Stamp is how a finding's details print a moment: the time of day to the µs.
func Stamp(t time.Time) string { return t.Format("15:04:05.000000") }

type register struct {
	value string
	token fence.Token
}

type writeInput struct {
	token  fence.Token
	value  string
	fenced bool
}

type readInput struct{}

var registerModel = porcupine.Model{
	Init: func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		st := state.(register)
		switch in := input.(type) {
		case writeInput:
			if !in.fenced {
				return output.(Outcome) != Refused, register{value: in.value, token: st.token}
			}
			admissible := in.token > 0 && in.token >= st.token
			next := st
			if admissible {
				next = register{value: in.value, token: in.token}
			}
			switch output.(Outcome) {
			case Accepted:
				return admissible, next
			case Refused:
				return !admissible, st
			default:
				// Put last in any order, "took effect" also covers "never".
				return true, next
			}
		case readInput:
			return output.(register) == st, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		switch in := input.(type) {
		case writeInput:
			return fmt.Sprintf("write(%s, %q, fenced=%t) -> %v", in.token, in.value, in.fenced, output)
		default:
			r := output.(register)
			return fmt.Sprintf("read() -> %q, %s", r.value, r.token)
		}
	},
}

func operations(ops []Op) []porcupine.Operation {
	if len(ops) == 0 {
		return nil
	}
	base := slices.MinFunc(ops, func(a, b Op) int { return a.Call.Compare(b.Call) }).Call
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		p := porcupine.Operation{Call: int64(op.Call.Sub(base)), Return: int64(op.Return.Sub(base))}
		switch {
		case op.Kind == Write:
			p.Input = writeInput{token: op.Token, value: op.Value, fenced: op.Fenced}
			p.Output = op.Outcome
			if op.Outcome == Unknown {
				p.Return = math.MaxInt64
			}
		case op.Kind == Read && op.Outcome == Accepted:
			p.Input = readInput{}
			p.Output = register{value: op.Value, token: op.Token}
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}
