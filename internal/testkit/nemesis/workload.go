package nemesis

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/rwlock"
	"github.com/dlockgo/dlock/single"
)

// Counts are what the workers did.
type Counts struct {
	Dos           int64 `json:"dos"`            // dlock.Do calls
	Grants        int64 `json:"grants"`         // leases granted (Do and holder pauses)
	AcquireErrors int64 `json:"acquire_errors"` // acquisitions that failed or ran out of time
	Writes        int64 `json:"writes"`
	WritesRefused int64 `json:"writes_refused"` // by the fence
	Reads         int64 `json:"reads"`
	Pauses        int64 `json:"holder_pauses"`    // holder pauses that got their lease
	PausedRefused int64 `json:"paused_refused"`   // paused holders' late writes the fence refused
	ItemClaims    int64 `json:"item_claims"`      // of the work queue's items
	ItemsReAdded  int64 `json:"items_readded"`    // claims of an id completed before, then added again
	ItemsDone     int64 `json:"items_done"`       // Completes the server accepted
	RWWriters     int64 `json:"rw_writer_grants"` // of the read-write lock
	RWReaders     int64 `json:"rw_reader_grants"`
	RWReadsBehind int64 `json:"rw_reads_behind"` // valid readers' reads of a register written under a newer token
	SetGrants     int64 `json:"set_grants"`      // AcquireAll of two lock keys (each also counted in grants)
	Breaks        int64 `json:"breaks"`          // operators' breaks (Break faults) run
	BreaksHeld    int64 `json:"breaks_held"`     // of them, of a key a lease held
	BreaksFailed  int64 `json:"breaks_failed"`   // of them, that failed: of unknown outcome
	Terms         int64 `json:"terms"`           // terms of office won (campaign)
	Overstays     int64 `json:"overstays"`       // leases held to their end with a waiter queued (overstay)
}

// workload is the workers of one run and what they recorded.
type workload struct {
	p       *Plan
	cfg     Config
	res     map[string]*safety.Resource
	workers []*worker
	wg      sync.WaitGroup

	mu          sync.Mutex
	acqs        map[string][]safety.Acquisition
	items       map[string]*safety.Resource // of the work queue's items, by resource name (see claimItem)
	completions []completion                // of claims
	sql         *sqlRegister                // the lock keys' registers, with Config.SQL
	starved     []safety.Span               // where the process itself was starved (starvation)
	rwRes       *safety.Resource            // the read-write lock's register, written by its writers
	rwReaders   *safety.Resource            // the read-write lock's readers' holds, and nothing else
	behind      []readBehind                // valid readers' reads of a register written under a newer token
	errs        []string                    // of the harness

	dos, grants, acqErrs, writes, refused, reads, pauses, pausedRefused atomic.Int64
	itemClaims, itemsReAdded, itemsDone                                 atomic.Int64
	rwWriterGrants, rwReaderGrants, rwReadsBehind                       atomic.Int64
	setGrants                                                           atomic.Int64
	breaks, breaksHeld, breaksFailed, terms, overstays                  atomic.Int64

	rate *rateLoad // the workers' rate limit calls (ratelimit.go)
	hand *handles  // the hand-offs of leases by their handles (handles.go)
}

// strategyLocker is what both strategies' Lockers are, and what a worker
// locks with: one key or several, and leases handed over or broken.
type strategyLocker interface {
	dlock.Locker
	election.Locker
	AcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error)
	Resume(ctx context.Context, handle string, opts ...option.Option) (*lease.Lease, error)
	ForceRelease(ctx context.Context, key string) (lease.Broken, error)
}

type worker struct {
	n     int
	plan  Worker
	lk    strategyLocker
	sem   *permits.Semaphore // on the single strategy's server; nil on a quorum
	queue *claims.Queue      // likewise
	rw    *rwlock.Locker     // likewise
	close func()
	rng   *rand.Rand
	pause atomic.Int64 // the next operation is a holder pause this long past its TTL
	seq   int
}

// lockerOptions builds one worker's Locker on its own clients of addrs.
func newLocker(p *Plan, cfg Config, w Worker, addrs []string) (strategyLocker, node.Node, func(), error) {
	var nodes []node.Node
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for _, a := range addrs {
		switch w.Client {
		case "go-redis":
			// The client's defaults, retries included, as people run it.
			c := redis.NewClient(&redis.Options{Addr: a})
			n := goredis.New(c)
			nodes = append(nodes, n)
			closers = append(closers, func() { _ = c.Close() }, func() { _ = n.Close() })
		default:
			c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{a}, DisableCache: true})
			if err != nil {
				closeAll()
				return nil, nil, nil, fmt.Errorf("valkey-go client for %s: %w", a, err)
			}
			n := valkeygo.New(c)
			nodes = append(nodes, n)
			closers = append(closers, c.Close, func() { _ = n.Close() })
		}
	}
	var lk strategyLocker
	var err error
	if cfg.Plant == PlantTrustingResume {
		if nodes, err = trustingNodes(nodes, cfg.trust); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
	}
	if cfg.EarlyGrant {
		if err = plantEarly(w.Locker, nodes, cfg.earlySwaps); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
	}
	switch w.Locker {
	case QuorumLocker:
		opts := []option.Option{option.TTL(p.TTL), option.NodeTimeout(p.NodeTimeout)}
		if cfg.GuardOff {
			// The misconfiguration this switch models: nodes declared
			// durable that are not (RDB, or AOF everysec).
			opts = append(opts, option.DurableNodes(true))
		}
		lk, err = quorum.New(nodes, opts...)
	case SingleLocker:
		lk, err = single.New(nodes[0], option.TTL(p.TTL))
	case ReplicasLocker:
		lk, err = single.New(nodes[0], option.TTL(p.TTL), option.Replicas(1, p.ReplicaTimeout))
	}
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	var one node.Node
	if w.Locker != QuorumLocker {
		one = nodes[0]
	}
	return lk, one, func() {
		_ = lk.Close()
		closeAll()
	}, nil
}

func newWorkload(t *testing.T, p *Plan, cfg Config, addrs []string) *workload {
	t.Helper()
	wl := &workload{p: p, cfg: cfg, res: map[string]*safety.Resource{}, acqs: map[string][]safety.Acquisition{}}
	var opts []safety.Option
	switch {
	case cfg.Unfenced:
		opts = append(opts, safety.Unfenced())
	case cfg.SQL:
		wl.sql = newSQLRegister(t, cfg.Plant == PlantSQLUnfenced)
		opts = append(opts, safety.WithStore(wl.sql))
	}
	for _, k := range p.resources() {
		wl.res[k] = safety.NewResource(k, opts...)
	}
	if p.RWLock != "" {
		var opts []safety.Option
		if cfg.Unfenced {
			opts = append(opts, safety.Unfenced())
		}
		wl.rwRes = safety.NewResource(rwKey(p.RWLock), opts...)
		wl.rwReaders = safety.NewResource(rwReadersKey(p.RWLock))
	}
	for i, w := range p.Workers {
		lk, one, closeFn, err := newLocker(p, cfg, w, addrs)
		if err != nil {
			wl.close()
			t.Fatalf("nemesis: worker %d: %v", i, err)
		}
		wk := &worker{n: i, plan: w, lk: lk, close: closeFn}
		if one != nil && p.Permits != "" {
			wk.sem, err = permits.New(one, option.TTL(p.TTL))
			if err == nil {
				wk.queue, err = claims.New(one, queueName, option.TTL(p.TTL), option.KeepDone(keepDone))
			}
			if err == nil && p.RWLock != "" {
				wk.rw, err = newRWLock(p, one)
			}
			if err != nil {
				closeFn()
				wl.close()
				t.Fatalf("nemesis: worker %d: %v", i, err)
			}
		}
		h := fnv.New64a()
		h.Write([]byte(p.Strategy))
		wk.rng = rand.New(rand.NewPCG(uint64(p.Seed), h.Sum64()+uint64(i)+1))
		wl.workers = append(wl.workers, wk)
	}
	for _, wk := range wl.workers {
		warm(t, wk.lk)
	}
	wl.hand = newHandles()
	var err error
	if wl.rate, err = newRateLoad(p, cfg, addrs); err != nil {
		wl.close()
		t.Fatalf("nemesis: rate limits: %v", err)
	}
	return wl
}

// warm makes redistest.WarmRounds lock and unlock rounds through lk, as
// redistest.Warm does, but retries a failed round: a fresh quorum sits out
// one max TTL and repairs its nodes before it grants anything, and under
// the race detector a first dial may outlast a short node timeout.
func warm(t *testing.T, lk dlock.Locker) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < redistest.WarmRounds; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := lk.TryAcquire(ctx, "warm-"+strconv.Itoa(i))
		if err == nil {
			err = l.Release(ctx)
		}
		cancel()
		if err == nil {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("nemesis: warm-up round %d still failing after 20s: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pauseNext makes worker n's next operation a holder pause.
func (wl *workload) pauseNext(n int, d time.Duration) { wl.workers[n].pause.Store(int64(d)) }

// pauser is what a HolderPause fault needs of the workload.
type pauser interface {
	pauseNext(worker int, d time.Duration)
}

// start runs every worker until ctx ends; wait joins them.
func (wl *workload) start(ctx context.Context) {
	for _, wk := range wl.workers {
		wl.wg.Add(1)
		go func() {
			defer wl.wg.Done()
			for ctx.Err() == nil {
				if d := time.Duration(wk.pause.Swap(0)); d > 0 {
					wl.holderPause(ctx, wk, d)
				} else {
					wl.do(ctx, wk)
				}
				sleep(ctx, time.Duration(wk.rng.IntN(30))*time.Millisecond)
			}
		}()
	}
	wl.rate.start(ctx, &wl.wg)
}

func (wl *workload) wait() { wl.wg.Wait() }

// harness records an error of the harness itself, which fails the run.
func (wl *workload) harness(err error) {
	wl.mu.Lock()
	wl.errs = append(wl.errs, err.Error())
	wl.mu.Unlock()
}

func (wl *workload) close() {
	if wl.rate != nil {
		wl.rate.close()
	}
	for _, wk := range wl.workers {
		wk.close()
	}
}

// opTimeout bounds one acquisition's wait.
func (wl *workload) opTimeout() time.Duration { return 3*wl.p.TTL + 2*time.Second }

// recorder records the grant as soon as the Locker returns the lease, and
// keeps the lease for fn, which gets only its token from dlock.Do.
type recorder struct {
	dlock.Locker
	res *safety.Resource
	l   *lease.Lease
	at  time.Time
}

func (r *recorder) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	l, err := r.Locker.Acquire(ctx, key, opts...)
	if err == nil {
		r.at = time.Now()
		r.l = l
		r.res.Granted(l)
	}
	return l, err
}

func (wl *workload) do(ctx context.Context, wk *worker) {
	if wl.p.Bias == UnraisedReaders && wk.rw != nil && wk.rng.IntN(4) > 0 {
		// The bias's violation needs a paused writer with a reader
		// behind it: three calls in four take the read-write lock, so
		// that a slow run still brings several about.
		wl.rwlock(ctx, wk)
		return
	}
	key := wl.p.Keys[wk.rng.IntN(len(wl.p.Keys))]
	if office, ok := strings.CutPrefix(key, election.KeyPrefix); ok && wk.rng.IntN(4) > 0 {
		wl.campaign(ctx, wk, key, office)
		return
	}
	if (wl.p.Bias == ExpireQueued || wk.rng.IntN(overstayOdds) == 0) && !strings.HasPrefix(key, election.KeyPrefix) && wl.overstay(ctx, wk, key) {
		return
	}
	if wk.rng.IntN(4) == 0 {
		// One call in four hands its lease to another worker's Locker.
		wl.handoff(ctx, wk, key)
		return
	}
	if wk.rng.IntN(6) == 0 {
		// One call in six holds two lock keys at once.
		wl.lockSet(ctx, wk, wk.lk)
		return
	}
	if wk.sem != nil {
		// Two calls in seven for the read-write lock: one lock, where an
		// overlap needs a reader and a writer at once, and the faults'
		// windows excuse a good part of a run.
		switch wk.rng.IntN(7) {
		case 0:
			wl.permit(ctx, wk)
			return
		case 1:
			wl.claimItem(ctx, wk)
			return
		case 2, 3:
			if wk.rw != nil {
				wl.rwlock(ctx, wk)
				return
			}
		}
	}
	res := wl.res[key]
	u := wl.drawUse(wk)
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	rec := &recorder{Locker: wk.lk, res: res}
	start := time.Now()
	wl.dos.Add(1)
	_ = dlock.Do(octx, rec, key, func(context.Context, fence.Token) error {
		wl.use(res, rec.l, wk, u)
		return nil
	})
	wl.record(key, start, rec.l, rec.at, ctx.Err() != nil)
}

// use is how a holder uses its lease: how long it holds it, and when it
// writes within that.
type use struct {
	hold time.Duration
	at   []time.Duration // from the start of the hold, in order
}

// drawUse draws a use from wk's source: a hold, then one or two writes.
func (wl *workload) drawUse(wk *worker) use {
	u := use{hold: wl.p.hold(wk.rng)}
	u.at = []time.Duration{time.Duration(wk.rng.Int64N(int64(u.hold)))}
	if wk.rng.IntN(2) == 0 {
		u.at = append(u.at, time.Duration(wk.rng.Int64N(int64(u.hold))))
		slices.Sort(u.at)
	}
	return u
}

// use holds l for res as u says: writes with its token at u's moments,
// without a look at the lease's context first (the fence is what is
// under test, and a holder can always be late), reads, and records the
// release; the caller then gives the lease up.
func (wl *workload) use(res *safety.Resource, l safety.Lease, wk *worker, u use) {
	begin := time.Now()
	for _, d := range u.at {
		hodl(res, l, begin.Add(d))
		_ = wl.write(res, l, wk)
	}
	hodl(res, l, begin.Add(u.hold))
	if _, _, err := res.Read(context.Background()); err == nil {
		wl.reads.Add(1)
	}
	res.Released(l)
}

// hodl holds l until the given time, recording now and then that it
// still holds it, so that its interval follows its renewals.
func hodl(res *safety.Resource, l safety.Lease, until time.Time) {
	for left := time.Until(until); left > 0; left = time.Until(until) {
		time.Sleep(min(left, 100*time.Millisecond))
		res.Held(l)
	}
}

// holderPause acquires without auto-renew, sleeps past the lease's end,
// and writes with its old token.
func (wl *workload) holderPause(ctx context.Context, wk *worker, past time.Duration) {
	key := wl.p.Keys[wk.rng.IntN(len(wl.p.Keys))]
	res := wl.res[key]
	octx, cancel := context.WithTimeout(ctx, wl.opTimeout())
	defer cancel()
	start := time.Now()
	l, err := wk.lk.Acquire(octx, key)
	var at time.Time
	if err == nil {
		at = time.Now()
		res.Granted(l)
		wl.pauses.Add(1)
		sleepPast(l, past)
		if wl.write(res, l, wk) != nil {
			wl.pausedRefused.Add(1)
		}
		res.Released(l)
		_ = l.Release(context.Background())
	}
	wl.record(key, start, l, at, ctx.Err() != nil)
}

// sleepPast sleeps until past after l has ended by its holder's clock.
// The end is read when it comes, not at the grant: a lease a release
// handed over runs short and extends itself once in the background
// (leasing.Grant.Short), so a sleep drawn from its TTL at the grant would
// wake the holder inside the validity the extension gave it, and its
// release there would look, to the checker, like a lease still held.
func sleepPast(l *lease.Lease, past time.Duration) {
	<-l.Done()
	time.Sleep(past)
}

func (wl *workload) write(res *safety.Resource, l safety.Lease, wk *worker) error {
	wk.seq++
	wl.writes.Add(1)
	err := res.Write(context.Background(), l, fmt.Sprintf("w%d-%d", wk.n, wk.seq))
	if err != nil {
		wl.refused.Add(1)
	}
	return err
}

func (wl *workload) record(key string, start time.Time, l *lease.Lease, at time.Time, stopped bool) {
	if l == nil {
		wl.recordGrant(key, start, "", 0, at, stopped)
		return
	}
	wl.recordGrant(key, start, l.Owner(), l.Token(), at, stopped)
}

// recordGrant records one acquisition of key begun at start: granted at
// at to holder with token, or (at zero) refused, or cut short by the end
// of the run.
func (wl *workload) recordGrant(key string, start time.Time, holder string, token fence.Token, at time.Time, stopped bool) {
	a := safety.Acquisition{Start: start}
	switch {
	case holder != "" && !at.IsZero():
		wl.grants.Add(1)
		a.Holder, a.Granted, a.Token = holder, at, token
	case time.Since(start) < wl.opTimeout() && stopped:
		// cut short by the end of the run, not refused
	default:
		wl.acqErrs.Add(1)
	}
	wl.mu.Lock()
	wl.acqs[key] = append(wl.acqs[key], a)
	wl.mu.Unlock()
}

func (wl *workload) counts() Counts {
	return Counts{Dos: wl.dos.Load(), Grants: wl.grants.Load(), AcquireErrors: wl.acqErrs.Load(),
		Writes: wl.writes.Load(), WritesRefused: wl.refused.Load(), Reads: wl.reads.Load(),
		Pauses: wl.pauses.Load(), PausedRefused: wl.pausedRefused.Load(),
		ItemClaims: wl.itemClaims.Load(), ItemsReAdded: wl.itemsReAdded.Load(), ItemsDone: wl.itemsDone.Load(),
		RWWriters: wl.rwWriterGrants.Load(), RWReaders: wl.rwReaderGrants.Load(), RWReadsBehind: wl.rwReadsBehind.Load(),
		SetGrants: wl.setGrants.Load(), Breaks: wl.breaks.Load(), BreaksHeld: wl.breaksHeld.Load(),
		BreaksFailed: wl.breaksFailed.Load(), Terms: wl.terms.Load(), Overstays: wl.overstays.Load()}
}

// sleep sleeps d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
