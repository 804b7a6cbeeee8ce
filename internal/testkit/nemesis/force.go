package nemesis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// breaker is what a Break fault needs of the workload.
type breaker interface {
	forceRelease(f Fault, e *Event)
}

// forceRelease runs f, an operator's break of a lock key, through worker
// f.Worker's Locker, whoever holds
// the key: a plain lock, a set's, a holder pause's or a term of office.
// The key's Resource records the break (safety.Break): the broken lease
// ends when the break was sent, and the break's token goes to the fence,
// so that the old holder's later writes must be refused (FENCE), and the
// break is one of the key's acquisitions, started when sent and granted
// when answered, so that its token must be above every token granted
// before it and below the next holder's (ORDER). A break that fails may
// still have ended whichever lease was live across it: recorded as of
// unknown outcome. e.Note says what it broke. The key is the first from
// f.Targets[0] on, in the plan's order, that a lease holds as the break
// starts, so that most breaks break someone: f.Targets[0] when none is.
func (wl *workload) forceRelease(f Fault, e *Event) {
	key := wl.heldKey(f.Targets[0])
	res := wl.res[key]
	ctx, cancel := context.WithTimeout(context.Background(), wl.opTimeout())
	defer cancel()
	sent := time.Now()
	b, err := wl.workers[f.Worker].lk.ForceRelease(ctx, key)
	returned := time.Now()
	wl.breaks.Add(1)
	rec := safety.Break{Sent: sent, Returned: returned}
	switch {
	case err != nil:
		wl.breaksFailed.Add(1)
		rec.Unknown = true
		e.Note = fmt.Sprintf("key %q: failed after %v: %v", key, returned.Sub(sent).Round(time.Millisecond), err)
	case b.Held:
		wl.breaksHeld.Add(1)
		rec.Holder, rec.Token = brokenHolder(b.Owner, b.Metadata), b.Token
		e.Note = fmt.Sprintf("key %q: broke %s (token %s), break token %s, in %v", key, rec.Holder, b.Was, b.Token, returned.Sub(sent).Round(time.Millisecond))
	default:
		rec.Token = b.Token
		e.Note = fmt.Sprintf("key %q: free, last token %s, break token %s", key, b.Was, b.Token)
	}
	// The fence is told on a context of its own: the break may have used
	// up most of ctx, and a register outside the process (PostgreSQL)
	// needs its time.
	if err := res.Broke(context.Background(), rec); err != nil {
		wl.harness(fmt.Errorf("break of %q: the fence: %w", key, err))
	}
	if err == nil {
		wl.mu.Lock()
		wl.acqs[key] = append(wl.acqs[key], safety.Acquisition{Holder: fmt.Sprintf("break-%d", f.N),
			Start: sent, Granted: returned, Token: b.Token})
		wl.mu.Unlock()
	}
}

// brokenHolder is the name the key's Resource knows a broken lease by:
// its owner, or for a term of office (the only leases of the workload
// with metadata, the campaign's value) the term's name (see campaign).
func brokenHolder(owner, metadata string) string {
	if metadata != "" {
		return "term-" + metadata
	}
	return owner
}

// breakNotes lists up to n of the breaks that failed, a line each, for a
// report: why a break fails is worth a look.
func breakNotes(events []*Event, n int) string {
	var b strings.Builder
	for _, e := range events {
		if e.Kind == Break && strings.Contains(e.Note, ": failed after") && n > 0 {
			n--
			fmt.Fprintf(&b, "    break failed: %s\n", e)
		}
	}
	return b.String()
}

// heldKey returns the first lock key from p.Keys[from] on, round, that
// a lease valid by its holder's clock and not released holds now, as its
// Resource recorded it; p.Keys[from] when none does.
func (wl *workload) heldKey(from int) string {
	now := time.Now()
	for i := range wl.p.Keys {
		key := wl.p.Keys[(from+i)%len(wl.p.Keys)]
		h := wl.res[key].History()
		released := map[string]bool{}
		for _, r := range h.Releases {
			released[r.Holder] = true
		}
		for _, g := range h.Grants {
			if g.Until.After(now) && !released[g.Holder] {
				return key
			}
		}
	}
	return wl.p.Keys[from]
}
