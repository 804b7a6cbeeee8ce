package election_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// TestPausedLeaderFenced: leader A stops renewing (cut off from the lock's
// servers, as a paused or partitioned process is) but goes on writing; B
// is elected once A's lease has run out and writes with its token; A's
// late write, with its older token, is refused by a fenced register on a
// real server.
func TestPausedLeaderFenced(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("fenced")
		conf := lockerConf{ttl: time.Second}
		store := fence.NewStore(redistest.NodeFor(t, e.client, e.srvs[0].Addr()))
		r := safety.NewResource("resource-"+name, safety.WithStore(store))

		alk, links := e.cuttable(t, conf)
		a := held{campaign(t, newElection(t, alk, name), "a")}
		r.Granted(a)
		require.NoError(t, r.Write(ctx, a, "a: first"), "A's write in its term")

		links.cut() // A no longer renews, and does not know yet
		b := held{campaign(t, newElection(t, e.locker(t, conf), name), "b")}
		r.Granted(b)
		if b.Token() <= a.Token() {
			t.Fatalf("B's token %d; want above A's %d", b.Token(), a.Token())
		}
		require.NoError(t, r.Write(ctx, b, "b: first"), "B's write")
		if err := r.Write(ctx, a, "a: late"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("A's late write: %v; want ErrStale", err)
		}
		value, tok, err := r.Read(ctx)
		require.NoError(t, err)
		if value != "b: first" || tok != b.Token() {
			t.Fatalf("register holds %q under %d; want B's write under %d", value, tok, b.Token())
		}
		rep := r.Check()
		if !rep.Safe() || rep.FencedRefused != 1 || rep.Holders != 2 {
			t.Fatalf("history: %v; want safe, 2 holders, 1 write refused", rep)
		}

		links.restore()
		ended(t, a.Term)
		_ = a.Resign(ctx) // lost: ErrNotHeld, or a timeout behind the cut
		require.NoError(t, b.Resign(ctx))
	})
}

// TestTermsHistory: candidates campaign over and over, each term writing
// to a fenced register and resigning, while an observer follows. The
// history holds no overlap, no refused or stale write, tokens in the order
// terms were granted, and the observer saw leaders in rising token order,
// ending with the vacancy.
func TestTermsHistory(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		name := e.office("history")
		const candidates, terms, writes = 3, 8, 3
		r := safety.NewResource("resource-" + name)
		obsEl := newElection(t, e.locker(t, lockerConf{}), name)
		obs := observe(t, obsEl)
		if l := next(t, obs); l != (election.Leader{}) {
			t.Fatalf("first observed: %+v; want a vacancy", l)
		}
		// The values observed while the terms run, kept in order; the
		// buffer holds more than the terms can cause.
		vals := make(chan election.Leader, 4*candidates*terms)
		stopCollect := make(chan struct{})
		collected := make(chan struct{})
		go func() {
			defer close(collected)
			for {
				select {
				case l := <-obs:
					select {
					case vals <- l:
					case <-stopCollect:
						return
					}
				case <-stopCollect:
					return
				}
			}
		}()

		var (
			mu   sync.Mutex
			acqs []safety.Acquisition
			toks []fence.Token
			wg   sync.WaitGroup
		)
		for c := range candidates {
			el := newElection(t, e.locker(t, lockerConf{}), name)
			wg.Go(func() {
				for i := range terms {
					value := "c" + strconv.Itoa(c) + "-" + strconv.Itoa(i)
					start := time.Now()
					term, err := el.Campaign(ctx, value)
					if err != nil {
						t.Errorf("%s: Campaign: %v", value, err)
						return
					}
					h := held{term}
					r.Granted(h)
					mu.Lock()
					acqs = append(acqs, safety.Acquisition{Holder: h.Owner(), Start: start, Granted: time.Now(), Token: term.Token()})
					toks = append(toks, term.Token())
					mu.Unlock()
					for w := range writes {
						if err := r.Write(ctx, h, value+"/"+strconv.Itoa(w)); err != nil {
							t.Errorf("%s: write %d: %v", value, w, err)
						}
					}
					r.Released(h)
					if err := term.Resign(ctx); err != nil {
						t.Errorf("%s: Resign: %v", value, err)
					}
				}
			})
		}
		wg.Wait()

		rep := r.Check()
		if !rep.Safe() || rep.Overlaps != 0 || rep.FencedRefused != 0 || rep.Holders != candidates*terms {
			t.Fatalf("history: %v; want safe, no overlap, nothing refused, %d holders", rep, candidates*terms)
		}
		if vs := safety.CheckOrder(acqs); len(vs) != 0 {
			t.Fatalf("token order: %v", vs)
		}

		// One last term, held until the observer has seen it, then the
		// vacancy its resignation leaves: the end of what it observes.
		final := campaign(t, obsEl, "final")
		var seen []election.Leader
		for len(seen) == 0 || seen[len(seen)-1].Value != "final" {
			seen = append(seen, next(t, vals))
		}
		require.NoError(t, final.Resign(ctx))
		for seen[len(seen)-1] != (election.Leader{}) {
			seen = append(seen, next(t, vals))
		}
		close(stopCollect)
		<-collected
		toks = append(toks, final.Token())
		var last fence.Token
		for i, l := range seen {
			if l == (election.Leader{}) {
				continue
			}
			if l.Token <= last || !slices.Contains(toks, l.Token) {
				t.Fatalf("observed #%d %+v after token %d; want a term's token, rising; seen %+v", i, l, last, seen[:i+1])
			}
			last = l.Token
		}
	})
}
