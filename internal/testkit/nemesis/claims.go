package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/option"
)

// queueName is the work queue of the single strategy's workers. Each
// claimItem adds one of queueIDs ids, drawn at random: an id is completed
// and added again many times in a run, and its tokens must go on rising
// across each Complete and Add, whatever the clock does (the token floor
// a Complete leaves; see option.IdleTTL).
const queueName = "jobs"

// queueIDs is how many item ids the workers share. MEM bounds the queue by
// them: each has at most an entry and a place in the queue's sets, or its
// done record and token floor.
const queueIDs = 8

// keepDone is how long a completed item's record lives, keeping Add from
// putting it back: short, so that an id comes back to the queue soon, and
// the records of a run are gone by the time MEM is measured.
const keepDone = 200 * time.Millisecond

// completion is one Complete of a claim, as its worker saw it.
type completion struct {
	id       string
	token    fence.Token
	granted  time.Time // when the claim it completes was granted
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

// claimItem adds an item (one of queueIDs: an id already in the queue,
// or completed moments ago, is not added again), claims the next pending
// one (FIFO: most often an item another worker added), holds it as a lock is held (a
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
	if err := wk.queue.Add(octx, fmt.Sprintf("job-%d", wk.rng.IntN(queueIDs))); err != nil {
		return // the server is away; the claim would fail the same way
	}
	start := time.Now()
	c, err := wk.queue.Claim(octx, option.AutoRenew(true))
	if err != nil {
		if !errors.Is(err, claims.ErrEmpty) && ctx.Err() == nil {
			wl.acqErrs.Add(1)
		}
		return
	}
	granted := time.Now()
	l := c.Lease()
	key, res := wl.item(c.ID())
	wl.itemClaims.Add(1)
	if wl.completedBefore(c.ID()) {
		wl.itemsReAdded.Add(1)
	}
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
		wl.completions = append(wl.completions, completion{id: c.ID(), token: c.Token(), granted: granted, call: call, accepted: err == nil})
		wl.mu.Unlock()
	}
	fcancel()
	wl.recordGrant(key, start, l.Owner(), c.Token(), granted, ctx.Err() != nil)
}

// completedBefore reports whether a Complete of id was accepted.
func (wl *workload) completedBefore(id string) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	for _, c := range wl.completions {
		if c.id == id && c.accepted {
			return true
		}
	}
	return false
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
// claim of their item with a larger token had been granted before they
// were called: completions by a stale holder. Each is a Fencing violation
// dated, as safety.Violation says, by the later of the two grants: the
// larger token's, when a holder paused past its lease completes late; the
// completing claim's own, when the larger token was granted first and
// then lost (a master's data lost near a clock fault hands out a smaller
// one afterwards), so that the fault that explains it is the one that
// dates it.
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
				out = append(out, keyed{key, safety.Violation{Property: safety.Fencing, At: safety.Later(a.Granted, c.granted),
					Detail: fmt.Sprintf("Complete of %s with token %v (granted %s) accepted after token %v was granted (%s)",
						c.id, c.token, safety.Stamp(c.granted), a.Token, safety.Stamp(a.Granted))}})
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
