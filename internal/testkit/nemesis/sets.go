package nemesis

import (
	"context"
	"strings"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/option"
)

// setKeys draws two distinct lock keys (never the election's office), in
// a random order: two workers asking for the same pair may name it in
// opposite orders.
func (wl *workload) setKeys(wk *worker) []string {
	var plain []string
	for _, k := range wl.p.Keys {
		if !strings.HasPrefix(k, election.KeyPrefix) {
			plain = append(plain, k)
		}
	}
	if len(plain) < 2 {
		return nil
	}
	i := wk.rng.IntN(len(plain))
	j := wk.rng.IntN(len(plain) - 1)
	if j >= i {
		j++
	}
	return []string{plain[i], plain[j]}
}

// lockSet holds two lock keys at once through AcquireAll, and uses each
// key's resource as a lock's holder does (use), with that key's token:
// each key's history then holds set leases and single leases together,
// and ME, ORDER and FENCE judge them per key as for any lease on it.
func (wl *workload) lockSet(ctx context.Context, wk *worker, m strategyLocker) {
	keys := wl.setKeys(wk)
	if keys == nil {
		return
	}
	u := wl.drawUse(wk)
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	start := time.Now()
	wl.dos.Add(1)
	l, err := m.AcquireAll(octx, keys, option.AutoRenew(true))
	var at time.Time
	if err == nil {
		at = time.Now()
		wl.setGrants.Add(1)
		held := l.Keys()
		parts := make([]safety.Lease, len(held))
		ress := make([]*safety.Resource, len(held))
		for i, h := range held {
			parts[i], ress[i] = safety.Part(l, h.Token), wl.res[h.Key]
			ress[i].Granted(parts[i])
		}
		begin := time.Now()
		for _, d := range u.at {
			hodlAll(ress, parts, begin.Add(d))
			for i := range ress {
				_ = wl.write(ress[i], parts[i], wk)
			}
		}
		hodlAll(ress, parts, begin.Add(u.hold))
		for i := range ress {
			if _, _, err := ress[i].Read(context.Background()); err == nil {
				wl.reads.Add(1)
			}
			ress[i].Released(parts[i])
		}
		_ = l.Release(context.Background())
	}
	for _, k := range keys {
		if err != nil {
			wl.recordGrant(k, start, "", 0, time.Time{}, ctx.Err() != nil)
			continue
		}
		tok, _ := l.TokenOf(k)
		wl.recordGrant(k, start, l.Owner(), tok, at, ctx.Err() != nil)
	}
}

// hodlAll is hodl for the keys of a set.
func hodlAll(ress []*safety.Resource, parts []safety.Lease, until time.Time) {
	for left := time.Until(until); left > 0; left = time.Until(until) {
		time.Sleep(min(left, 100*time.Millisecond))
		for i := range ress {
			ress[i].Held(parts[i])
		}
	}
}
