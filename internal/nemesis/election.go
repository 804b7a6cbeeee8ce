package nemesis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
)

// term is a term of office as the safety checker sees a lease: its holder
// is the campaign, named by the worker and its count of campaigns.
type term struct {
	*election.Term
	owner string
}

func (t term) Owner() string { return t.owner }

// campaign runs one term of office through package election, on the
// office's lock key: the worker campaigns, and once elected writes
// through the office's fence and reads, as a holder of the lock does in
// do, then resigns. The terms are recorded with the key's acquisitions, so
// the properties checked of locks (one holder at a time by the fence,
// tokens in grant order, no stale write accepted) are checked of
// leadership; plain locks of the same key, taken by do and by holder
// pauses, compete with the campaigns.
func (wl *workload) campaign(ctx context.Context, wk *worker, key, office string) {
	res := wl.res[key]
	hold := wl.p.hold(wk.rng)
	at := []time.Duration{time.Duration(wk.rng.Int64N(int64(hold)))}
	if wk.rng.IntN(2) == 0 {
		at = append(at, time.Duration(wk.rng.Int64N(int64(hold))))
		slices.Sort(at)
	}
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	start := time.Now()
	e, err := election.New(wk.lk, office, election.WithTTL(wl.p.TTL))
	if err != nil {
		wl.harness(fmt.Errorf("worker %d: election.New: %w", wk.n, err))
		return
	}
	wk.seq++
	t, err := e.Campaign(octx, fmt.Sprintf("w%d-%d", wk.n, wk.seq))
	if err != nil {
		wl.recordTerm(key, start, nil, time.Time{}, ctx.Err() != nil)
		return
	}
	granted := time.Now()
	h := term{Term: t, owner: fmt.Sprintf("term-w%d-%d", wk.n, wk.seq)}
	res.Granted(h)
	begin := time.Now()
	for _, d := range at {
		hodl(res, h, begin.Add(d))
		_ = wl.write(res, h, wk)
	}
	hodl(res, h, begin.Add(hold))
	if _, _, err := res.Read(context.Background()); err == nil {
		wl.reads.Add(1)
	}
	res.Released(h)
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = t.Resign(rctx)
	rcancel()
	wl.recordTerm(key, start, &h, granted, ctx.Err() != nil)
}

// recordTerm is record for a term.
func (wl *workload) recordTerm(key string, start time.Time, t *term, at time.Time, stopped bool) {
	var holder string
	var token fence.Token
	if t != nil {
		holder, token = t.owner, t.Token()
	}
	wl.recordGrant(key, start, holder, token, at, stopped)
}
