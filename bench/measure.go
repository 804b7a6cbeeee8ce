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

type serialResult struct {
	ops           int
	p50, p99      time.Duration
	allocs, bytes float64
	errs          int
	firstErr      error
}

// measureSerial runs op on key one at a time, warm times unmeasured, then up
// to maxOps times or for maxDur, whichever ends first. Allocations are the
// process's runtime.MemStats deltas divided by ops, so they include whatever
// the client's own goroutines allocate for the op.
func measureSerial(ctx context.Context, op opFunc, key string, warm, maxOps int, maxDur time.Duration) serialResult {
	var r serialResult
	for range warm {
		if ctx.Err() != nil {
			return r
		}
		_ = op(ctx, key)
	}
	lat := make([]time.Duration, 0, maxOps)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	end := start.Add(maxDur)
	for len(lat) < maxOps && ctx.Err() == nil {
		t0 := time.Now()
		if t0.After(end) {
			break
		}
		err := op(ctx, key)
		lat = append(lat, time.Since(t0))
		if err != nil {
			r.errs++
			if r.firstErr == nil {
				r.firstErr = err
			}
		}
	}
	runtime.ReadMemStats(&after)
	r.ops = len(lat)
	if r.ops == 0 {
		return r
	}
	r.allocs = float64(after.Mallocs-before.Mallocs) / float64(r.ops)
	r.bytes = float64(after.TotalAlloc-before.TotalAlloc) / float64(r.ops)
	slices.Sort(lat)
	r.p50 = quantile(lat, 0.50)
	r.p99 = quantile(lat, 0.99)
	return r
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
	perSec   float64
	errs     int64
	firstErr error
}

// counter is padded so workers do not share a cache line.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

// measureParallel runs op from len(keys) goroutines, each on its own key,
// for warm (unmeasured) then dur, each goroutine stopping after maxOps.
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
	n0, t0 := sum(), time.Now()
	sleepCtx(ctx, dur)
	n1, t1 := sum(), time.Now()
	stop.Store(true)
	wg.Wait()
	r.ops = n1 - n0
	r.perSec = float64(r.ops) / t1.Sub(t0).Seconds()
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

type contentionResult struct {
	acquisitions int
	perSec       float64
	selfShare    float64 // of acquisitions after the first, those by the goroutine that released last
	maxShare     float64 // the busiest goroutine's acquisitions over a fair share
	minShare     float64 // the idlest goroutine's acquisitions over a fair share
	waitP50      time.Duration
	waitP99      time.Duration
	waitMax      time.Duration // includes waits still open when the window closed
	gapP50       time.Duration // release call → next acquire's return
	gapP99       time.Duration
	failures     int // acquire calls that gave up (retries exhausted) and were repeated
	overlaps     int // acquisitions while another goroutine still held the lock: must be 0
	errs         int
	firstErr     error
}

// measureContention runs workers goroutines that each, in a loop, acquire
// key, hold it for hold, and release it, for dur. An acquire that gives up
// (a peer's retries ran out) is repeated at once, its wait still counting.
func measureContention(ctx context.Context, acquire acquireFunc, key string, workers int, hold, dur time.Duration) contentionResult {
	var (
		r           contentionResult
		mu          sync.Mutex
		lastHolder  = -1
		lastRelease time.Time
		perWorker   = make([]int, workers)
		waits       []time.Duration
		gaps        []time.Duration
		self        int
		open        []time.Duration
		holding     atomic.Int32
		wg          sync.WaitGroup
	)
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
					if err == nil {
						break
					}
					if actx.Err() != nil {
						break
					}
					mu.Lock()
					if errors.Is(err, errGaveUp) {
						r.failures++
					} else {
						r.errs++
						if r.firstErr == nil {
							r.firstErr = err
						}
					}
					mu.Unlock()
					if !errors.Is(err, errGaveUp) {
						sleepCtx(actx, time.Millisecond) // don't spin on a broken node
					}
				}
				t1 := time.Now()
				if h == nil || t1.After(deadline) {
					if h != nil {
						releaseBounded(h)
					}
					mu.Lock()
					open = append(open, t1.Sub(t0))
					mu.Unlock()
					return
				}
				if holding.Add(1) != 1 {
					mu.Lock()
					r.overlaps++
					mu.Unlock()
				}
				mu.Lock()
				waits = append(waits, t1.Sub(t0))
				if lastHolder >= 0 {
					gaps = append(gaps, t1.Sub(lastRelease))
					if lastHolder == w {
						self++
					}
				}
				perWorker[w]++
				mu.Unlock()
				time.Sleep(hold)
				mu.Lock()
				lastHolder, lastRelease = w, time.Now()
				mu.Unlock()
				holding.Add(-1)
				releaseBounded(h)
			}
		})
	}
	wg.Wait()
	r.acquisitions = len(waits)
	r.perSec = float64(r.acquisitions) / dur.Seconds()
	if len(gaps) > 0 {
		r.selfShare = float64(self) / float64(len(gaps))
	}
	if r.acquisitions > 0 {
		fair := float64(r.acquisitions) / float64(workers)
		r.maxShare = float64(slices.Max(perWorker)) / fair
		r.minShare = float64(slices.Min(perWorker)) / fair
	}
	slices.Sort(waits)
	slices.Sort(gaps)
	r.waitP50, r.waitP99 = quantile(waits, 0.5), quantile(waits, 0.99)
	if len(waits) > 0 {
		r.waitMax = waits[len(waits)-1]
	}
	for _, o := range open {
		r.waitMax = max(r.waitMax, o)
	}
	r.gapP50, r.gapP99 = quantile(gaps, 0.5), quantile(gaps, 0.99)
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
