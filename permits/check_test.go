package permits_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// span is the time a holder believed it held a permit: from when the
// grant reached it to when it sent its release, or to the end of its
// validity by its own clock if that came first. The server held the permit
// over at least that span: it granted before its reply arrived, released
// after the release was sent, and its permit ends after the holder's
// validity (which has the drift taken off).
type span struct {
	holder   string
	slot     int
	token    fence.Token
	from, to time.Time
}

// checkSpans returns what breaks a semaphore of n permits in spans: more
// than n spans at one instant, two spans at one instant in one slot, a
// token handed out twice, or a slot whose tokens do not rise in the order
// its spans began. A span ends where the next may begin: [from, to).
func checkSpans(spans []span, n int) []string {
	var bad []string
	type edge struct {
		at    time.Time
		delta int
		s     *span
	}
	edges := make([]edge, 0, 2*len(spans))
	for i := range spans {
		s := &spans[i]
		if !s.from.Before(s.to) {
			continue
		}
		edges = append(edges, edge{s.from, +1, s}, edge{s.to, -1, s})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	live := 0
	inSlot := map[int]*span{}
	for _, e := range edges {
		if e.delta < 0 {
			live--
			if inSlot[e.s.slot] == e.s {
				delete(inSlot, e.s.slot)
			}
			continue
		}
		live++
		if live > n {
			bad = append(bad, fmt.Sprintf("%d permits live at %v (holder %s joined)", live, e.at.Format(time.StampMicro), e.s.holder))
		}
		if o := inSlot[e.s.slot]; o != nil {
			bad = append(bad, fmt.Sprintf("slot %d held by %s and %s at once", e.s.slot, o.holder, e.s.holder))
		}
		inSlot[e.s.slot] = e.s
	}
	seen := map[fence.Token]string{}
	bySlot := map[int][]span{}
	for _, s := range spans {
		if h, ok := seen[s.token]; ok {
			bad = append(bad, fmt.Sprintf("token %d granted to %s and %s", s.token, h, s.holder))
		}
		seen[s.token] = s.holder
		// The order of grants is judged by when their holders held them;
		// a holder that never saw its permit valid (it returned from
		// Acquire past the end) gives no time to order by.
		if s.from.Before(s.to) {
			bySlot[s.slot] = append(bySlot[s.slot], s)
		}
	}
	for slot, ss := range bySlot {
		slices.SortFunc(ss, func(a, b span) int { return a.from.Compare(b.from) })
		for i := 1; i < len(ss); i++ {
			if ss[i].token <= ss[i-1].token {
				bad = append(bad, fmt.Sprintf("slot %d: %s's token %d after %s's %d", slot, ss[i].holder, ss[i].token, ss[i-1].holder, ss[i-1].token))
			}
		}
	}
	return bad
}

func TestCheckSpans(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sp := func(h string, slot int, tok fence.Token, from, to int) span {
		return span{holder: h, slot: slot, token: tok, from: at(from), to: at(to)}
	}
	for _, c := range []struct {
		name  string
		n     int
		spans []span
		bad   int
	}{
		{"two permits, two holders", 2, []span{sp("a", 0, 1, 0, 10), sp("b", 1, 2, 5, 15)}, 0},
		{"a third holder at once", 2, []span{sp("a", 0, 1, 0, 10), sp("b", 1, 2, 5, 15), sp("c", 2, 3, 8, 9)}, 1},
		{"back to back is not at once", 1, []span{sp("a", 0, 1, 0, 10), sp("b", 0, 2, 10, 20)}, 0},
		{"one slot, two holders", 2, []span{sp("a", 0, 1, 0, 10), sp("b", 0, 2, 5, 15)}, 1},
		{"a token twice", 2, []span{sp("a", 0, 1, 0, 10), sp("b", 1, 1, 20, 30)}, 1},
		{"a slot's token falls", 2, []span{sp("a", 0, 5, 0, 10), sp("b", 0, 4, 20, 30)}, 1},
		{"tokens across slots in any order", 2, []span{sp("a", 0, 5, 0, 10), sp("b", 1, 4, 2, 30)}, 0},
		{"an empty span counts for nothing", 1, []span{sp("a", 0, 1, 0, 10), sp("b", 1, 2, 5, 5)}, 0},
		{"an empty span is in no slot's order", 1, []span{sp("a", 0, 5, 0, 10), sp("b", 0, 4, 20, 20)}, 0},
	} {
		if got := checkSpans(c.spans, c.n); len(got) != c.bad {
			t.Errorf("%s: %d violations %q; want %d", c.name, len(got), got, c.bad)
		}
	}
}
