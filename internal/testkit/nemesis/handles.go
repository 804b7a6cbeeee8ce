package nemesis

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
)

// HandleStats is what the handle hand-offs did.
type HandleStats struct {
	Handoffs     int64 `json:"handoffs"`      // leases written out and resumed by another worker's Locker
	Extends      int64 `json:"extends"`       // by the resumed leases
	Released     int64 `json:"released"`      // resumed leases released, then their handle tried again
	Expired      int64 `json:"expired"`       // resumed leases left to expire, then their handle tried again
	Forged       int64 `json:"forged"`        // forged handles (token raised, checksum recomputed) tried
	NotResumed   int64 `json:"not_resumed"`   // genuine handles the servers did not take up (no answer, too little left)
	EndedRefused int64 `json:"ended_refused"` // ended handles' Resume and Extend refused
	ExtendAsked  int64 `json:"extend_asked"`  // of those Extends, the ones the first lease's clock left to the servers
}

// handles records the workers' hand-offs: what HANDLE judges beside the
// keys' own checks.
type handles struct {
	mu     sync.Mutex
	owners map[string]bool // the owners of leases resumed, by key
	vs     map[string][]safety.Violation

	handoffs, extends, released, expired, forged, notResumed, endedRefused, extendAsked atomic.Int64
}

func newHandles() *handles {
	return &handles{owners: map[string]bool{}, vs: map[string][]safety.Violation{}}
}

func (h *handles) violation(key, detail string) {
	h.mu.Lock()
	h.vs[key] = append(h.vs[key], safety.Violation{Property: safety.Handle, At: time.Now(), Detail: detail})
	h.mu.Unlock()
}

// handoff is a lease that changes Lockers: the worker acquires key,
// writes the lease out as a handle, and another worker's Locker resumes
// it (Resume), holds it as a lock's holder does, extending it by
// hand, and releases it or lets it expire. Along the way a forged handle
// (its token raised, the checksum recomputed) must be refused, and, once
// the lease has ended, the handle's Resume and the first lease's Extend
// too. The key's resource sees one holder throughout (the owner does not
// change); its ME, ORDER and FENCE are the key's, and HANDLE adds what is
// the handle's own (see handles.check).
func (wl *workload) handoff(ctx context.Context, wk *worker, key string) {
	res := wl.res[key]
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	start := time.Now()
	l, err := wk.lk.Acquire(octx, key)
	if err != nil {
		wl.record(key, start, nil, time.Time{}, ctx.Err() != nil)
		return
	}
	at := time.Now()
	res.Granted(l)
	defer wl.record(key, start, l, at, ctx.Err() != nil)
	peer := wl.workers[(wk.n+1+wk.rng.IntN(len(wl.workers)-1))%len(wl.workers)]
	other := wl.workers[(peer.n+1+wk.rng.IntN(len(wl.workers)-1))%len(wl.workers)]
	hd, err := l.Handle()
	if err != nil {
		// The lease ended before it could be written out.
		res.Released(l)
		_ = l.Release(context.Background())
		return
	}
	text := hd.String()
	wl.tryForged(ctx, other, key, text, l.Token())

	rctx, rcancel := context.WithTimeout(ctx, wl.p.TTL)
	r, err := peer.lk.Resume(rctx, text)
	rcancel()
	if err != nil {
		// Not taken up: the first holder goes on with it.
		wl.hand.notResumed.Add(1)
		wl.use(res, l, wk, wl.drawUse(wk))
		_ = l.Release(context.Background())
		return
	}
	wl.hand.handoffs.Add(1)
	wl.hand.mu.Lock()
	wl.hand.owners[r.Owner()] = true
	wl.hand.mu.Unlock()
	if r.Token() != l.Token() {
		wl.hand.violation(key, fmt.Sprintf("resumed with token %s; the servers granted %s", r.Token(), l.Token()))
	}
	res.Held(r)
	wl.holdExtending(res, r, wk, wl.drawUse(wk))
	expire := wk.rng.IntN(3) == 0
	if expire {
		// Left to run out: wait past its end on the servers too (a
		// TTL after its holder's validity ends, which the drift
		// margin puts before the servers').
		<-r.Done()
		time.Sleep(wl.p.TTL)
		res.Released(r)
		wl.hand.expired.Add(1)
	} else {
		res.Released(r)
		rctx, rcancel := context.WithTimeout(context.Background(), wl.p.TTL)
		err := r.Release(rctx)
		rcancel()
		if err != nil {
			return // perhaps still held: not an ended handle
		}
		wl.hand.released.Add(1)
	}
	how := map[bool]string{true: "expired", false: "released"}[expire]
	ectx, ecancel := context.WithTimeout(context.Background(), wl.p.TTL)
	defer ecancel()
	if l.Err() == nil {
		// Still valid by its own clock: the servers judge the Extend.
		wl.hand.extendAsked.Add(1)
	}
	if err := l.Extend(ectx, wl.p.TTL); err == nil {
		wl.hand.violation(key, fmt.Sprintf("the first lease of %s (token %s) extended after its resumed lease %s", l.Owner(), l.Token(), how))
		_ = l.Release(ectx)
	} else {
		wl.hand.endedRefused.Add(1)
	}
	if again, err := other.lk.Resume(ectx, text); err == nil {
		wl.hand.violation(key, fmt.Sprintf("the handle of %s (token %s) resumed again after its lease %s", l.Owner(), l.Token(), how))
		_ = again.Release(ectx)
	} else {
		wl.hand.endedRefused.Add(1)
	}
}

// tryForged raises the token of handle text by one, recomputes its
// checksum as docs/handles.md describes the format, and resumes it on
// wk's Locker: it must be refused, and a lease it yields must not
// extend. Under the trusting-resume plant, the plant is told the forged
// token for the time of the Resume.
func (wl *workload) tryForged(ctx context.Context, wk *worker, key, text string, tok fence.Token) {
	forged, owner, err := forge(text, tok+1)
	if err != nil {
		wl.harness(fmt.Errorf("forge a handle of %q: %w", key, err))
		return
	}
	wl.hand.forged.Add(1)
	if wl.cfg.trust != nil {
		wl.cfg.trust.set(owner, tok+1)
		defer wl.cfg.trust.clear(owner)
	}
	fctx, cancel := context.WithTimeout(ctx, wl.p.TTL)
	defer cancel()
	f, err := wk.lk.Resume(fctx, forged)
	if err != nil {
		return
	}
	wl.hand.violation(key, fmt.Sprintf("a forged handle of %s (token %s raised to %s) resumed, with token %s", owner, tok, tok+1, f.Token()))
	if f.Extend(fctx, wl.p.TTL) == nil {
		wl.hand.violation(key, fmt.Sprintf("a forged handle of %s (token %s raised to %s) extended", owner, tok, tok+1))
	}
}

// forge returns handle text with its token set to tok and its checksum
// recomputed: "dlock1." + base64url(JSON fields) + "." + hex of the
// first 8 bytes of the SHA-256 of what precedes the dot. It also returns
// the owner the handle names.
func forge(text string, tok fence.Token) (string, string, error) {
	const prefix = "dlock1."
	rest, ok := strings.CutPrefix(text, prefix)
	if !ok {
		return "", "", errors.New("no " + prefix + " prefix")
	}
	body, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", errors.New("no checksum")
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return "", "", err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "", "", err
	}
	var owner string
	if err := json.Unmarshal(fields["o"], &owner); err != nil {
		return "", "", fmt.Errorf("owner: %w", err)
	}
	if _, ok := fields["t"]; !ok {
		return "", "", errors.New("no token field")
	}
	fields["t"] = json.RawMessage(strconv.FormatUint(uint64(tok), 10))
	raw, err = json.Marshal(fields)
	if err != nil {
		return "", "", err
	}
	body = base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(prefix + body))
	return prefix + body + "." + hex.EncodeToString(sum[:8]), owner, nil
}

// holdExtending holds r for u.hold, writing at u's moments, and extends
// it by hand every third of its TTL; it stops extending once an extension
// fails (the lease is lost) and holds on, as a late holder would, for the
// fence to judge.
func (wl *workload) holdExtending(res *safety.Resource, r *lease.Lease, wk *worker, u use) {
	begin := time.Now()
	next := begin.Add(wl.p.TTL / 3)
	extending := true
	holdUntil := func(until time.Time) {
		for left := time.Until(until); left > 0; left = time.Until(until) {
			if extending && !time.Now().Before(next) {
				ctx, cancel := context.WithTimeout(context.Background(), wl.p.TTL/3)
				err := r.Extend(ctx, wl.p.TTL)
				cancel()
				if err != nil {
					extending = false
				} else {
					wl.hand.extends.Add(1)
				}
				next = time.Now().Add(wl.p.TTL / 3)
			}
			time.Sleep(min(left, 50*time.Millisecond, max(time.Until(next), time.Millisecond)))
			res.Held(r)
		}
	}
	for _, d := range u.at {
		holdUntil(begin.Add(d))
		_ = wl.write(res, r, wk)
	}
	holdUntil(begin.Add(u.hold))
	if _, _, err := res.Read(context.Background()); err == nil {
		wl.reads.Add(1)
	}
}

// handleViolations returns HANDLE's violations by key: those the
// hand-offs recorded, and every ME violation of a key whose overlap
// names the owner of a resumed lease (a resumed lease's extensions kept
// it valid beside another holder).
func (h *handles) violations(keyVs []keyViolations) []keyViolations {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []keyViolations
	keys := make([]string, 0, len(h.vs))
	for k := range h.vs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, keyViolations{k, slices.Clone(h.vs[k])})
	}
	for _, kv := range keyVs {
		var vs []safety.Violation
		for _, v := range kv.vs {
			if v.Property != safety.MutualExclusion {
				continue
			}
			for owner := range h.owners {
				if strings.Contains(v.Detail, owner) {
					vs = append(vs, safety.Violation{Property: safety.Handle, At: v.At, Detail: "a resumed lease's " + v.Detail})
					break
				}
			}
		}
		if len(vs) > 0 {
			out = append(out, keyViolations{kv.key, vs})
		}
	}
	return out
}

// handleWindows are HANDLE's windows: ME's, where two holders may be
// valid at once, a lease the servers lost may be found held again, and an
// ended one taken up; and on the single strategy, a clock forward's a
// jump longer: the lock a lease took or extended while its server's clock
// was ahead outlives, by the jump, the lease that ended by its holder's
// clock, once the clock is put back (seen in an hour-long soak: an ended
// handle taken up again 0.6 s after the ME window closed, under a 4.6 s
// jump). A quorum's one node with its clock off is no majority.
func handleWindows(p *Plan, events []*Event, ws []safety.Window) []safety.Window {
	var out []safety.Window
	for _, w := range ws {
		if w.Property == safety.MutualExclusion {
			w.Property = safety.Handle
			out = append(out, w)
		}
	}
	for _, e := range events {
		if p.Strategy == Single && e.Kind == ClockForward && e.Skipped == "" && !e.Start.IsZero() {
			out = append(out, safety.Window{Property: safety.Handle, From: e.Start,
				To: e.End.Add(Linger(p) + e.Jump), Why: e.Fault.String() + ", its jump"})
		}
	}
	return out
}

func (h *handles) stats() *HandleStats {
	return &HandleStats{Handoffs: h.handoffs.Load(), Extends: h.extends.Load(), Released: h.released.Load(),
		Expired: h.expired.Load(), Forged: h.forged.Load(), NotResumed: h.notResumed.Load(), EndedRefused: h.endedRefused.Load(),
		ExtendAsked: h.extendAsked.Load()}
}

func (st *HandleStats) summary() string {
	return fmt.Sprintf("handles: %d leases resumed by another worker's Locker (%d extends; %d released, %d expired, then refused %d times as ended, %d of the first leases' Extends asked of the servers), %d not taken up, %d forged handles tried",
		st.Handoffs, st.Extends, st.Released, st.Expired, st.EndedRefused, st.ExtendAsked, st.NotResumed, st.Forged)
}
