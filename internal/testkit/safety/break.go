package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// Break is an operator's break of the resource's lock (ForceRelease)
// as the breaker saw it: sent at Sent, answered at Returned.
//
// The contract it is checked by (docs/handles.md): the lease that held
// the key when the break took effect on the servers ends there, and the
// break's token is above every token handed out for the key before it.
// The break takes effect at a moment between Sent and Returned that the
// breaker cannot see, so the checker ends the broken lease at Sent, the
// earliest it may have ended: a lease granted before the break returned
// may be the one broken, and a waiter may be granted the key before the
// break's answer arrives. Ending it at Returned would date two holders at
// once in every break whose answer was slow. Nothing else is excused: the
// next holder is a new grant, checked against every other lease as ever.
type Break struct {
	// Holder is the owner of the lease broken (lease.Broken's Owner, as
	// Lease.Owner names it); empty when the key was free, or the break's
	// outcome is not known.
	Holder string
	// Unknown: the break failed, or its answer was lost; it may still have
	// ended whichever lease held the key (a quorum's break may have taken
	// the lock on some nodes). Every lease granted before Returned and
	// still valid at Sent then ends at Sent.
	Unknown bool
	// Token is the break's own token (0 when Unknown): shown to the fence.
	Token          fence.Token
	Sent, Returned time.Time
	// Fenced is when the fence had been shown Token (set by Broke; zero
	// when it was not): from then on it refuses the broken holder.
	Fenced time.Time
}

// Broke records b and, when it has a token, shows the token to the fence
// as an operator must (docs/handles.md): recorded as a fenced write of no
// holder, after which every write with an older token is refused; the
// broken holder's writes that begin after that and are accepted are
// Fencing violations (see Check). A fence already past the token (the
// waiter the break woke has written with its newer one) refuses it, and
// that is no error: it refuses the old holder all the same. An unfenced
// Resource only records b, told the token and ignoring it. It returns the
// store's error, if any.
func (r *Resource) Broke(ctx context.Context, b Break) error {
	if b.Unknown || b.Token == 0 || r.unfenced {
		if r.unfenced && !b.Unknown && b.Token != 0 {
			b.Fenced = time.Now() // told, and ignoring it
		}
		r.mu.Lock()
		r.h.Breaks = append(r.h.Breaks, b)
		r.mu.Unlock()
		return nil
	}
	op := Op{Kind: Write, Token: b.Token, Fenced: true, Value: fmt.Sprintf("break %s", b.Token), Call: time.Now()}
	var err error
	if r.store != nil {
		err = r.store.Put(ctx, r.key, op.Value, op.Token)
	} else {
		r.mu.Lock()
		if err = r.guard.Admit(r.key, op.Token); err == nil {
			r.value, r.token = op.Value, op.Token
		}
		r.mu.Unlock()
	}
	op.Return = time.Now()
	op.Outcome, op.Err = outcome(err)
	r.record(op)
	if op.Outcome == Unknown {
		return err
	}
	b.Fenced = op.Return
	r.mu.Lock()
	r.h.Breaks = append(r.h.Breaks, b)
	r.mu.Unlock()
	return nil
}

// endBroken ends, at its break's Sent, each lease of byHolder that a
// break in bs ended (see Break). A lease whose grant reached its holder
// after the break was sent (the servers granted it, the break took it,
// and the grant's reply came last) ends as it begins: it held nothing.
func endBroken(bs []Break, byHolder map[string]*interval) {
	for _, b := range bs {
		for holder, iv := range byHolder {
			hit := b.Holder != "" && holder == b.Holder
			if b.Unknown {
				hit = iv.from.Before(b.Returned) && iv.to.After(b.Sent)
			}
			if hit {
				iv.to = Later(iv.from, earliest(iv.to, b.Sent))
			}
		}
	}
}

// brokenWrites returns a Fencing violation for each write of a broken
// holder that began after the fence was shown its break's token and was
// accepted: the fence must refuse them.
func brokenWrites(h History) []Violation {
	var out []Violation
	for _, b := range h.Breaks {
		if b.Holder == "" || b.Unknown || b.Fenced.IsZero() {
			continue
		}
		for _, op := range h.Ops {
			// A token above the break's is a later grant's: an Acquire
			// whose first grant the break took before the call returned
			// claims again under the same owner, and the fence rightly
			// admits the lease it then returns.
			if op.Kind == Write && op.Holder == b.Holder && op.Outcome == Accepted && op.Call.After(b.Fenced) && op.Token < b.Token {
				out = append(out, Violation{Property: Fencing, At: b.Returned, Detail: fmt.Sprintf(
					"write accepted from a broken holder: %s token %s at %s, after the fence was shown the break's token %s at %s",
					op.Holder, op.Token, Stamp(op.Call), b.Token, Stamp(b.Fenced))})
			}
		}
	}
	return out
}
