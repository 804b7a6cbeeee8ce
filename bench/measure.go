package main

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// held is a lock the program holds.
type held interface {
	release(ctx context.Context) error
}

// opFunc is one uncontended operation on key: lock+unlock, or one EVALSHA.
type opFunc func(ctx context.Context, key string) error

// acquireFunc blocks (by the library's own waiting or retry) until key is
// held or ctx ends.
type acquireFunc func(ctx context.Context, key string) (held, error)

// releaseTimeout bounds every release, which runs on a context of its own.
const releaseTimeout = 2 * time.Second

// serialAcc gathers the c=1 figures of one subject over many batches.
type serialAcc struct {
	lat      []time.Duration
	cpu      cpuSnap
	mallocs  uint64
	bytes    uint64
	errs     int
	firstErr error
}

// serialBatch runs op on key n times, one at a time. Allocations are the
// process's runtime.MemStats deltas around the batch, so they include what
// the client's own goroutines allocate for the ops; only this subject runs
// during the batch.
func serialBatch(ctx context.Context, op opFunc, key string, n int, acc *serialAcc) {
	var before, after runtime.MemStats
	c0 := sampleCPU() // outside the MemStats window: it allocates
	runtime.ReadMemStats(&before)
	for range n {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		err := op(ctx, key)
		acc.lat = append(acc.lat, time.Since(t0))
		if err != nil {
			acc.errs++
			if acc.firstErr == nil {
				acc.firstErr = err
			}
		}
	}
	runtime.ReadMemStats(&after)
	c1 := sampleCPU()
	d := c1.sub(c0)
	acc.cpu.client += d.client
	acc.cpu.server += d.server
	acc.mallocs += after.Mallocs - before.Mallocs
	acc.bytes += after.TotalAlloc - before.TotalAlloc
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

type parallelResult struct {
	ops      int64
	elapsed  time.Duration
	cpu      cpuSnap
	errs     int64
	firstErr error
}

// counter is padded so workers do not share a cache line.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

// measureParallel runs op from len(keys) goroutines, each on its own key,
// for warm (unmeasured) then dur, each goroutine stopping after maxOps
// calls. Only successful ops count.
func measureParallel(ctx context.Context, op opFunc, keys []string, warm, dur time.Duration, maxOps int64) parallelResult {
	var (
		r       parallelResult
		errMu   sync.Mutex
		counts  = make([]counter, len(keys))
		stop    atomic.Bool
		wg      sync.WaitGroup
		errsTot atomic.Int64
	)
	for i, key := range keys {
		wg.Go(func() {
			c := &counts[i]
			for n := int64(0); n < maxOps && !stop.Load() && ctx.Err() == nil; n++ {
				if err := op(ctx, key); err != nil {
					if errsTot.Add(1) == 1 {
						errMu.Lock()
						r.firstErr = err
						errMu.Unlock()
					}
					continue // ops/s counts completed lock+unlocks only
				}
				c.n.Add(1)
			}
		})
	}
	sum := func() int64 {
		var s int64
		for i := range counts {
			s += counts[i].n.Load()
		}
		return s
	}
	sleepCtx(ctx, warm)
	n0, t0, c0 := sum(), time.Now(), sampleCPU()
	sleepCtx(ctx, dur)
	n1, t1, c1 := sum(), time.Now(), sampleCPU()
	stop.Store(true)
	wg.Wait()
	r.ops = n1 - n0
	r.elapsed = t1.Sub(t0)
	r.cpu = c1.sub(c0)
	r.errs = errsTot.Load()
	return r
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// contentionAcc gathers one subject's contention figures over windows.
type contentionAcc struct {
	dur       time.Duration
	perWorker []int
	waits     []time.Duration
	gaps      []time.Duration // Release called → next holder's acquire returned
	self      int             // acquisitions by the goroutine that released last
	held      time.Duration   // total time holders held the lock (acquire returned → Release called)
	open      []time.Duration // waits still open when a window closed
	failures  int             // acquires that gave up (retries exhausted) and were repeated
	overlaps  int             // acquisitions while another goroutine held the lock: must stay 0
	errs      int
	firstErr  error
}

type contentionResult struct {
	acquisitions     int
	perSec           float64
	selfShare        float64 // of acquisitions with a predecessor, those by the goroutine that released last
	maxShare         float64 // busiest goroutine's acquisitions over a fair share
	minShare         float64
	waitP50, waitP99 time.Duration
	waitMax          time.Duration // includes waits still open when a window closed
	gapP50, gapP99   time.Duration
	holdMean         time.Duration // the hold as slept, overshoot included: 1/holdMean bounds acquisitions/s
	busy             float64       // share of the time the lock was held
}

// contentionWindow runs workers goroutines that each, in a loop, acquire
// key, hold it for hold, and release it, for dur, adding to acc. An acquire
// that gives up (a peer's retries ran out) is repeated at once, its wait
// still counting.
func contentionWindow(ctx context.Context, acquire acquireFunc, key string, workers int, hold, dur time.Duration, acc *contentionAcc) {
	var (
		mu          sync.Mutex
		lastHolder  = -1
		lastRelease time.Time
		holding     atomic.Int32
		wg          sync.WaitGroup
	)
	if acc.perWorker == nil {
		acc.perWorker = make([]int, workers)
	}
	start := time.Now()
	deadline := start.Add(dur)
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for w := range workers {
		wg.Go(func() {
			for actx.Err() == nil {
				t0 := time.Now()
				var h held
				for actx.Err() == nil {
					var err error
					h, err = acquire(actx, key)
					if err == nil || actx.Err() != nil {
						break
					}
					gaveUp := errors.Is(err, errGaveUp)
					mu.Lock()
					if gaveUp {
						acc.failures++
					} else {
						acc.errs++
						if acc.firstErr == nil {
							acc.firstErr = err
						}
					}
					mu.Unlock()
					if !gaveUp {
						sleepCtx(actx, time.Millisecond) // don't spin on a failing node
					}
				}
				t1 := time.Now()
				if h == nil || t1.After(deadline) {
					if h != nil {
						releaseBounded(h)
					}
					mu.Lock()
					acc.open = append(acc.open, t1.Sub(t0))
					mu.Unlock()
					return
				}
				mu.Lock()
				if holding.Add(1) != 1 {
					acc.overlaps++
				}
				acc.waits = append(acc.waits, t1.Sub(t0))
				if lastHolder >= 0 {
					acc.gaps = append(acc.gaps, t1.Sub(lastRelease))
					if lastHolder == w {
						acc.self++
					}
				}
				acc.perWorker[w]++
				mu.Unlock()
				time.Sleep(hold)
				mu.Lock()
				lastHolder, lastRelease = w, time.Now()
				acc.held += lastRelease.Sub(t1)
				holding.Add(-1)
				mu.Unlock()
				releaseBounded(h)
			}
		})
	}
	wg.Wait()
	acc.dur += dur
}

func (acc *contentionAcc) result() contentionResult {
	var r contentionResult
	r.acquisitions = len(acc.waits)
	if acc.dur > 0 {
		r.perSec = float64(r.acquisitions) / acc.dur.Seconds()
	}
	if r.acquisitions > 0 {
		r.holdMean = acc.held / time.Duration(r.acquisitions)
	}
	if acc.dur > 0 {
		r.busy = float64(acc.held) / float64(acc.dur)
	}
	if len(acc.gaps) > 0 {
		r.selfShare = float64(acc.self) / float64(len(acc.gaps))
	}
	if r.acquisitions > 0 {
		fair := float64(r.acquisitions) / float64(len(acc.perWorker))
		r.maxShare = float64(slices.Max(acc.perWorker)) / fair
		r.minShare = float64(slices.Min(acc.perWorker)) / fair
	}
	slices.Sort(acc.waits)
	slices.Sort(acc.gaps)
	r.waitP50, r.waitP99 = quantile(acc.waits, 0.5), quantile(acc.waits, 0.99)
	if len(acc.waits) > 0 {
		r.waitMax = acc.waits[len(acc.waits)-1]
	}
	for _, o := range acc.open {
		r.waitMax = max(r.waitMax, o)
	}
	r.gapP50, r.gapP99 = quantile(acc.gaps, 0.5), quantile(acc.gaps, 0.99)
	return r
}

// errGaveUp marks an acquire that ended because the library's retries ran
// out, not because of a failure.
var errGaveUp = errors.New("gave up after its retries")

func releaseBounded(h held) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = h.release(ctx)
}
