package permits_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// TestAtMostN: goroutines on both clients contend for the n permits of
// one name. Most hold a few ms and release; some die (stop using their
// permit, neither renewing nor releasing it) and their permit comes back
// at its TTL; some hold past their TTL, renewed in the background. Every
// holder's span (see span) is recorded, and checkSpans finds no instant
// with more than n, no slot held twice at once, no token handed out
// twice, and every slot's tokens rising.
func TestAtMostN(t *testing.T) {
	srv := redistest.Start(t)
	nodes := redistest.Nodes(t, srv.Addr())
	const (
		name    = "bounded"
		n       = 3
		workers = 6 // per client
		rounds  = 30
		ttl     = 250 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
		dead  int
		// late: grants whose validity ran out before their reply was read
		// (Acquire says so, lease.ErrExpired); lapsed: holders that
		// outlived their lease before they released it. Both come of a
		// holder descheduled for a TTL, and are what the library must say.
		late, lapsed int
	)
	for _, c := range nodes {
		s := newSemaphore(t, c.Node, option.TTL(ttl))
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					opts := []option.Option{option.Retry(time.Millisecond, 50*time.Millisecond)}
					kind := rand.IntN(20)
					if kind == 0 {
						opts = append(opts, option.AutoRenew(true))
					}
					var (
						l   *lease.Lease
						err error
					)
					if i%3 == 0 { // a newcomer, granted only when nobody waits
						for l, err = s.TryAcquire(ctx, name, n, opts...); errors.Is(err, lease.ErrTaken); l, err = s.TryAcquire(ctx, name, n, opts...) {
							time.Sleep(time.Millisecond)
						}
					} else {
						l, err = s.Acquire(ctx, name, n, opts...)
					}
					if errors.Is(err, lease.ErrExpired) {
						mu.Lock()
						late++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Errorf("%s worker %d round %d: %v", c.Name, w, i, err)
						return
					}
					sp := span{holder: c.Name + "/" + strconv.Itoa(w) + "/" + strconv.Itoa(i),
						slot: permits.Slot(l), token: l.Token(), from: time.Now()}
					var hold time.Duration
					switch {
					case kind == 0:
						hold = 2 * ttl // past its TTL, renewed
					case kind <= 2:
						hold = -1 // dies
					default:
						hold = time.Duration(rand.IntN(3000)) * time.Microsecond
					}
					sp.to = watch(l, hold)
					if hold >= 0 {
						// Refused only once the lease has ended by its
						// holder's own clock too.
						if err := l.Release(ctx); errors.Is(err, lease.ErrNotHeld) && l.TTL() == 0 {
							mu.Lock()
							lapsed++
							mu.Unlock()
						} else if err != nil {
							t.Errorf("%s release: %v", sp.holder, err)
						}
					}
					mu.Lock()
					spans = append(spans, sp)
					if hold < 0 {
						dead++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if bad := checkSpans(spans, n); len(bad) > 0 {
		t.Fatalf("%d violations in %d spans, e.g.:\n%q", len(bad), len(spans), bad[:min(5, len(bad))])
	}
	t.Logf("%d spans of %d permits, %d holders died, none over n (%d grants late, %d holders outlived their lease)", len(spans), n, dead, late, lapsed)
}

// watch keeps an eye on l for hold (until it ends by itself when hold < 0)
// and returns the end of the span its holder believed it held: now, while
// l is still valid, else the latest end of validity l showed. The end is
// read against a time taken before l.TTL, never after it: a goroutine
// descheduled between the two would otherwise push it past l's own.
func watch(l *lease.Lease, hold time.Duration) time.Time {
	var until time.Time
	look := func() bool {
		now := time.Now()
		d := l.TTL()
		if d <= 0 {
			return false
		}
		if u := now.Add(d); u.After(until) { // at most l's end of validity
			until = u
		}
		return true
	}
	end := time.Now().Add(hold)
	for hold < 0 || time.Now().Before(end) {
		if !look() {
			return until
		}
		time.Sleep(2 * time.Millisecond)
	}
	if look() {
		// Held until now, the release about to go out; or, when the
		// goroutine was descheduled since it looked, until the end it saw.
		if now := time.Now(); now.Before(until) {
			return now
		}
	}
	return until
}
