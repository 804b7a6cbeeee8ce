package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/safety"
	"github.com/dlockgo/dlock/lease"
)

// queueName is the work queue of the single strategy's workers. Each
// claimItem adds an item of its own, with an id never used before: the
// tokens of an id rise by one claim to the next, and an id completed,
// then added again, would start over from the server's clock, which a
// clock step back may put below the tokens handed out before (claims'
// documented limit).
const queueName = "jobs"

// keepDone is how long a completed item's record lives: short, so that
// the records of a run are gone by the time MEM is measured.
const keepDone = 2 * time.Second

// completion is one Complete of a claim, as its worker saw it.
type completion struct {
	id       string
	token    fence.Token
	call     time.Time // when Complete was called
	accepted bool
}

// item returns the resource of the queue's item id, made on first use.
func (wl *workload) item(id string) (key string, res *safety.Resource) {
	key = "claims:" + queueName + "/" + id
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.items == nil {
		wl.items = map[string]*safety.Resource{}
	}
	if res = wl.items[key]; res == nil {
		if wl.cfg.Unfenced {
			res = safety.NewResource(key, safety.Unfenced())
		} else {
			res = safety.NewResource(key)
		}
		wl.items[key] = res
	}
	return key, res
}

// claimItem adds a new item, claims the next pending one (FIFO: most
// often an item another worker added), holds it as a lock is held (a
// write through the item's fence, a read), and completes it, or, one time
// in four, hands it back with Retry. Each item is a resource checked as a
// lock key is; and every Complete the server accepted must carry the
// item's latest token: one called after a newer claim of its item was
// granted is a stale completion (checkCompletions).
func (wl *workload) claimItem(ctx context.Context, wk *worker) {
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	u := wl.drawUse(wk)
	wl.dos.Add(1)
	wk.seq++
	if err := wk.queue.Add(octx, fmt.Sprintf("w%d-%d", wk.n, wk.seq)); err != nil {
		return // the server is away; the claim would fail the same way
	}
	wl.itemsAdded.Add(1)
	start := time.Now()
	c, err := wk.queue.Claim(octx, lease.WithAutoRenew())
	if err != nil {
		if !errors.Is(err, claims.ErrEmpty) && ctx.Err() == nil {
			wl.acqErrs.Add(1)
		}
		return
	}
	granted := time.Now()
	l := c.Lease()
	key, res := wl.item(c.ID())
	res.Granted(l)
	wl.use(res, l, wk, u)
	fctx, fcancel := context.WithTimeout(context.Background(), wl.opTimeout())
	call := time.Now()
	if wk.rng.IntN(4) == 0 {
		_ = c.Retry(fctx)
	} else {
		err := c.Complete(fctx)
		if err == nil {
			wl.itemsDone.Add(1)
		}
		wl.mu.Lock()
		wl.completions = append(wl.completions, completion{id: c.ID(), token: c.Token(), call: call, accepted: err == nil})
		wl.mu.Unlock()
	}
	fcancel()
	wl.recordGrant(key, start, l.Owner(), c.Token(), granted, ctx.Err() != nil)
}

// itemKeys lists the queue's item resources, sorted.
func (wl *workload) itemKeys() []string {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	keys := make([]string, 0, len(wl.items))
	for k := range wl.items {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkCompletions finds the Completes the server accepted although a
// newer claim of their item had been granted before they were called:
// completions by a stale holder. Each is a Fencing violation dated by
// that newer grant.
func (wl *workload) checkCompletions() []keyed {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	var out []keyed
	for _, c := range wl.completions {
		if !c.accepted {
			continue
		}
		key := "claims:" + queueName + "/" + c.id
		for _, a := range wl.acqs[key] {
			if a.Holder != "" && a.Token > c.token && a.Granted.Before(c.call) {
				out = append(out, keyed{key, safety.Violation{Property: safety.Fencing, At: a.Granted,
					Detail: fmt.Sprintf("Complete of %s with token %v accepted after token %v was granted", c.id, c.token, a.Token)}})
				break
			}
		}
	}
	return out
}

// keyed is a violation and the resource it broke.
type keyed struct {
	key string
	v   safety.Violation
}
