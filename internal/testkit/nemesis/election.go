package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/option"
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
	u := wl.drawUse(wk)
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	start := time.Now()
	e, err := election.New(wk.lk, office, option.TTL(wl.p.TTL))
	if err != nil {
		wl.harness(fmt.Errorf("worker %d: election.New: %w", wk.n, err))
		return
	}
	wk.seq++
	t, err := e.Campaign(octx, fmt.Sprintf("w%d-%d", wk.n, wk.seq))
	if err != nil {
		wl.recordGrant(key, start, "", 0, time.Time{}, ctx.Err() != nil)
		return
	}
	granted := time.Now()
	wl.terms.Add(1)
	h := term{Term: t, owner: fmt.Sprintf("term-w%d-%d", wk.n, wk.seq)}
	res.Granted(h)
	wl.use(res, h, wk, u)
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = t.Resign(rctx)
	rcancel()
	wl.recordGrant(key, start, h.owner, t.Token(), granted, ctx.Err() != nil)
}
