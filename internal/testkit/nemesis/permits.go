package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// permit takes one of the plan's permits through package permits, on the
// worker's server, writes through the fence of the permit's slot and
// reads, then releases it. Each slot is checked as a lock key is: one
// holder at a time by the fence, tokens in grant order, no stale write
// accepted; and no slot is ever N or above, so that no more than N are
// held at once.
func (wl *workload) permit(ctx context.Context, wk *worker) {
	u := wl.drawUse(wk)
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	wl.dos.Add(1)
	start := time.Now()
	l, err := wk.sem.Acquire(octx, wl.p.Permits, wl.p.PermitsN, option.AutoRenew(true))
	if err != nil {
		// Which slot it would have had is unknown: counted, not recorded.
		if ctx.Err() == nil {
			wl.acqErrs.Add(1)
		}
		return
	}
	granted := time.Now()
	slot := permits.Slot(l)
	if slot < 0 || slot >= wl.p.PermitsN {
		wl.harness(fmt.Errorf("worker %d: permit in slot %d of %d", wk.n, slot, wl.p.PermitsN))
		_ = l.Release(context.Background())
		return
	}
	key := permitSlot(wl.p.Permits, slot)
	res := wl.res[key]
	res.Granted(l)
	wl.use(res, l, wk, u)
	rctx, rcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	_ = l.Release(rctx)
	rcancel()
	wl.record(key, start, l, granted, ctx.Err() != nil)
}
