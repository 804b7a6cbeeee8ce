package safety

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// heldLease is a lease as a holder knows it: its owner, token and the local
// monotonic end of its validity.
type heldLease struct {
	owner string
	token fence.Token
	until time.Time
}

func (l heldLease) Owner() string      { return l.owner }
func (l heldLease) Token() fence.Token { return l.token }
func (l heldLease) TTL() time.Duration { return max(0, time.Until(l.until)) }
func valid(d time.Duration) time.Time  { return time.Now().Add(d) }

func TestResourceFencedInMemory(t *testing.T) {
	ctx := t.Context()
	r := NewResource("res")
	a := heldLease{"a", 1, valid(time.Minute)}
	b := heldLease{"b", 2, valid(time.Minute)}
	r.Granted(a)
	require.NoError(t, r.Write(ctx, a, "a1"), "write a1")
	r.Granted(b)
	require.NoError(t, r.Write(ctx, b, "b1"), "write b1")
	err := r.Write(ctx, a, "a2")
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Highest != 2 {
		t.Fatalf("write a2 after b1 = %v; want a StaleError with Highest 2", err)
	}
	if v, tok, err := r.Read(ctx); v != "b1" || tok != 2 || err != nil {
		t.Fatalf("Read() = %q, %v, %v; want b1, 2", v, tok, err)
	}
	got := r.Check()
	want := Report{Holders: 2, Writes: 3, Overlaps: 1, FencedRefused: 1, Linearizable: true}
	if !equalReports(got, want) {
		t.Fatalf("Check() = %v; want %v", got, want)
	}
	h := r.History()
	if len(h.Grants) != 2 || len(h.Ops) != 4 || h.Ops[2].Outcome != Refused || h.Ops[2].Holder != "a" {
		t.Fatalf("History() = %+v", h)
	}
}

func TestResourceUnfenced(t *testing.T) {
	ctx := t.Context()
	r := NewResource("res", Unfenced())
	a := heldLease{"a", 0, valid(50 * time.Millisecond)}
	r.Granted(a)
	time.Sleep(60 * time.Millisecond) // a's lease ends while it is "paused"
	b := heldLease{"b", 0, valid(time.Minute)}
	r.Granted(b)
	for _, w := range []struct {
		l heldLease
		v string
	}{{b, "b1"}, {a, "a1"}} {
		if err := r.Write(ctx, w.l, w.v); err != nil {
			t.Fatalf("unfenced write %s: %v", w.v, err)
		}
	}
	if v, _, _ := r.Read(ctx); v != "a1" {
		t.Fatalf("Read() = %q; want a1, the stale holder's write", v)
	}
	got := r.Check()
	want := Report{Holders: 2, Writes: 2, StaleAccepted: 1, UnfencedDoubleWrites: 1, Linearizable: true}
	if !equalReports(got, want) {
		t.Fatalf("Check() = %v; want %v", got, want)
	}
}

// acquireScript is the smallest lock with a fencing token: SET NX PX, and
// a counter bumped on every grant.
var acquireScript = node.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
`)

var releaseScript = node.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Concurrent writers take turns through a real lock on a real server and
// write through fence.Store; one of them is paused past its lease and
// writes late. The fenced register refuses it and stays linearizable; the
// same writes to an unfenced resource let it through.
func TestConcurrentFencedWritersOnServer(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range redistest.Nodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			keys := []string{"{" + c.Name + "}lock", "{" + c.Name + "}token"}
			const ttl = 250 * time.Millisecond
			acquire := func(owner string) (heldLease, error) {
				for {
					start := time.Now()
					r, err := c.Node.Eval(ctx, acquireScript, keys, owner, fmt.Sprint(ttl.Milliseconds()))
					if err != nil {
						return heldLease{}, err
					}
					if tok := r.Int(0); tok > 0 {
						drift := ttl/100 + 2*time.Millisecond
						return heldLease{owner, fence.Token(tok), start.Add(ttl - drift)}, nil
					}
					select {
					case <-ctx.Done():
						return heldLease{}, ctx.Err()
					case <-time.After(time.Millisecond):
					}
				}
			}

			fenced := NewResource("{"+c.Name+"}register", WithStore(fence.NewStore(c.Node)))
			unfenced := NewResource("mem", Unfenced())
			const writers, rounds = 4, 8
			var wg sync.WaitGroup
			var pausedOwner string // written by the paused writer, read after wg.Wait
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					for n := range rounds {
						l, err := acquire(fmt.Sprintf("w%d-%d", w, n))
						if err != nil {
							errs <- err
							return
						}
						fenced.Granted(l)
						unfenced.Granted(l)
						if l.token == 3 {
							// Paused past the lease, until a later holder has
							// written; the third grant leaves the others work.
							pausedOwner = l.owner
							if err := awaitNewerWrite(ctx, fenced, l.token); err != nil {
								errs <- err
								return
							}
						}
						for i := range 3 {
							v := fmt.Sprintf("%s/%d", l.owner, i)
							if err := fenced.Write(ctx, l, v); err != nil && !errors.Is(err, fence.ErrStale) {
								errs <- err
								return
							}
							_ = unfenced.Write(ctx, l, v)
						}
						if _, _, err := fenced.Read(ctx); err != nil {
							errs <- err
							return
						}
						fenced.Released(l)
						unfenced.Released(l)
						if _, err := c.Node.Eval(ctx, releaseScript, keys[:1], l.owner); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("writer: %v", err)
			}

			// Under load another holder may outlive its lease too; the paused
			// one surely did.
			got := fenced.Check()
			t.Logf("fenced:   %v", got)
			if got.Holders != writers*rounds || got.Writes != writers*rounds*3 || got.Overlaps != 0 ||
				got.StaleAccepted != 0 || got.FencedRefused < 3 || !got.Linearizable {
				t.Fatalf("fenced Check() = %v; want %d holders, %d writes, no overlap, no stale write accepted, >= 3 refused, linearizable",
					got, writers*rounds, writers*rounds*3)
			}
			if n := countWrites(fenced, pausedOwner, Refused); n != 3 {
				t.Fatalf("the paused holder had %d of its 3 fenced writes refused; want 3", n)
			}
			un := unfenced.Check()
			t.Logf("unfenced: %v", un)
			if un.UnfencedDoubleWrites < 3 || un.StaleAccepted != un.UnfencedDoubleWrites || un.Overlaps != 0 {
				t.Fatalf("unfenced Check() = %v; want the paused holder's 3 writes counted as double writes", un)
			}
			if n := countWrites(unfenced, pausedOwner, Accepted); n != 3 {
				t.Fatalf("the paused holder had %d of its 3 unfenced writes accepted; want 3", n)
			}
		})
	}
}

func awaitNewerWrite(ctx context.Context, r *Resource, mine fence.Token) error {
	for {
		for _, op := range r.History().Ops {
			if op.Kind == Write && op.Outcome == Accepted && op.Token > mine {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no later holder wrote: %w", ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func countWrites(r *Resource, holder string, o Outcome) int {
	n := 0
	for _, op := range r.History().Ops {
		if op.Kind == Write && op.Holder == holder && op.Outcome == o {
			n++
		}
	}
	return n
}

// Held follows a renewed lease, and records nothing for one that has ended:
// an ended lease must not be stretched into an overlap.
func TestResourceHeld(t *testing.T) {
	r := NewResource("res")
	a := heldLease{"a", 1, valid(30 * time.Millisecond)}
	r.Granted(a)
	a.until = valid(time.Minute) // renewed
	r.Held(a)
	b := heldLease{"b", 2, valid(time.Minute)}
	time.Sleep(40 * time.Millisecond)
	r.Granted(b)
	if got := r.Check(); got.Overlaps != 1 {
		t.Fatalf("a renewed, then b granted: Check() = %v; want the overlap", got)
	}

	r = NewResource("res")
	c := heldLease{"c", 1, valid(20 * time.Millisecond)}
	r.Granted(c)
	time.Sleep(30 * time.Millisecond)
	r.Held(c) // ended: nothing recorded
	r.Granted(heldLease{"d", 2, valid(time.Minute)})
	if got := r.Check(); got.Overlaps != 0 || len(r.History().Grants) != 2 {
		t.Fatalf("c ended, then d granted: Check() = %v, %d grants; want no overlap and 2 grants", got, len(r.History().Grants))
	}
}
