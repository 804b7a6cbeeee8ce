package single_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// resume takes up text, a handle's text form, on lk.
func resume(t *testing.T, lk *single.Locker, text string, opts ...option.Option) (*lease.Lease, error) {
	t.Helper()
	h, err := lease.ParseHandle(text)
	if err != nil {
		return nil, err
	}
	return lk.Resume(t.Context(), h.String(), opts...)
}

func TestHandleAcrossLockers(t *testing.T) {
	for _, form := range []string{"lean", "hash"} {
		t.Run(form, func(t *testing.T) {
			forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
				ctx := t.Context()
				// Two Lockers on clients of their own, as two processes have.
				var idle []option.Option
				if form == "hash" {
					idle = append(idle, option.IdleTTL(-1)) // kept for ever: the hash
				}
				a := newLocker(t, n, idle...)
				b := newLocker(t, redistest.NodeFor(t, redistest.OpenClients[1], srv.Addr()))
				key := "handle-" + form
				l, err := a.TryAcquire(ctx, key, option.TTL(5*time.Second), option.Metadata("job=7"))
				require.NoError(t, err)
				want := map[string]string{"lean": "string", "hash": "hash"}[form]
				if typ, _ := srv.Do("TYPE", "dlock:{"+key+"}"); typ != want {
					t.Fatalf("lock is a %s; want a %s", typ, want)
				}
				h, err := l.Handle()
				require.NoError(t, err, "Handle")
				text := h.String()

				r, err := resume(t, b, text)
				require.NoError(t, err, "Resume")
				if r.Key() != key || r.Token() != l.Token() || r.Owner() != l.Owner() || r.Metadata() != "job=7" {
					t.Fatalf("resumed %q token %v metadata %q; want %q token %v metadata job=7", r.Key(), r.Token(), r.Metadata(), key, l.Token())
				}
				if ttl := r.TTL(); ttl <= 3*time.Second || ttl > 5*time.Second {
					t.Fatalf("resumed TTL() = %v; want what the server has left, under 5s", ttl)
				}
				require.NoError(t, r.Extend(ctx, 9*time.Second), "Extend of the resumed lease")
				if ttl := r.TTL(); ttl <= 8*time.Second {
					t.Fatalf("TTL after Extend(9s) = %v", ttl)
				}
				// The original extends too: it is the same lease.
				require.NoError(t, l.Extend(ctx, 9*time.Second), "Extend of the original")
				require.NoError(t, r.Release(ctx), "Release of the resumed lease")
				if err := l.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("Extend of the original after the resumed release: %v; want ErrNotHeld", err)
				}
				// The handle of a lease that ended is refused.
				if _, err := resume(t, b, text); !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("Resume of an ended lease: %v; want ErrNotHeld", err)
				}
				if _, err := l.Handle(); !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("Handle of an ended lease: %v; want ErrNotHeld", err)
				}
			})
		})
	}
}

func TestHandleRefused(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a := newLocker(t, n)
		l, err := a.TryAcquire(ctx, "refuse")
		require.NoError(t, err)
		defer l.Release(ctx)
		h, err := l.Handle()
		require.NoError(t, err)
		text := h.String()

		// Another server: another Locker's handle.
		other := newLocker(t, redistest.NodeFor(t, redistest.Clients[0], redistest.Start(t).Addr()))
		_, err = resume(t, other, text)
		if !errors.Is(err, lease.ErrForeignHandle) || !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Resume on another server: %v; want ErrForeignHandle and ErrInvalid", err)
		}
		t.Log(err)

		// Edited: one character of the fields changed, or the text cut.
		i := len("dlock1.") + 5
		edited := text[:i] + string(text[i]^1) + text[i+1:]
		for _, bad := range []string{edited, text[:len(text)-3], "", "dlock1.e30.00", strings.Replace(text, "dlock1.", "dlock2.", 1)} {
			_, err := resume(t, a, bad)
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != "handle" {
				t.Fatalf("Resume of %q: %v; want an ArgError naming handle", bad, err)
			}
			if strings.Contains(err.Error(), l.Owner()[:32]) {
				t.Fatalf("the error quotes the owner: %v", err)
			}
		}

		// A handle whose token no longer matches: the lock was taken
		// again since (a forged one: the server checks, too).
		h.Token++
		if _, err := a.Resume(ctx, h.String()); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Resume with another token: %v; want ErrNotHeld", err)
		}

		// A lease on several keys is not written out.
		set, err := a.TryAcquireAll(ctx, []string{"s1", "s2"})
		require.NoError(t, err)
		defer set.Release(ctx)
		if _, err := set.Handle(); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("Handle of a set: %v; want ErrInvalid", err)
		}
	})
}

func TestHandleAutoRenew(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		a, b := newLocker(t, n), newLocker(t, n)
		l, err := a.TryAcquire(ctx, "renew", option.TTL(5*time.Second))
		require.NoError(t, err)
		h, err := l.Handle()
		require.NoError(t, err)
		r, err := resume(t, b, h.String(), option.AutoRenew(true), option.TTL(300*time.Millisecond))
		require.NoError(t, err)
		// Renewals at 100ms ask for 300ms: the server's lease soon
		// falls from 5s to under a second.
		require.Eventually(t, func() bool {
			p, _ := srv.Do("PTTL", "dlock:{renew}")
			ms, _ := strconv.Atoi(p)
			return ms > 0 && ms <= 300
		}, 5*time.Second, 20*time.Millisecond, "renewed with the resumed TTL")
		time.Sleep(time.Second)
		require.NoError(t, r.Err(), "renewed past its first TTL")
		require.NoError(t, r.Release(ctx))
	})
}

func TestForceRelease(t *testing.T) {
	for _, form := range []string{"lean", "hash"} {
		t.Run(form, func(t *testing.T) {
			forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
				ctx := t.Context()
				key := "break-" + form
				holder := newLocker(t, n)
				rec := &events.Recorder{}
				op := newLocker(t, redistest.NodeFor(t, redistest.OpenClients[1], srv.Addr()), option.Observer(rec))
				waiter := newLocker(t, n)
				store := fence.NewStore(n)
				var guard fence.Guard

				// A live holder: renewed every 100ms.
				l, err := holder.Acquire(ctx, key, option.TTL(300*time.Millisecond), option.AutoRenew(true), option.Metadata("host=a"))
				require.NoError(t, err)
				require.NoError(t, guard.Admit(key, l.Token()))
				require.NoError(t, store.Put(ctx, "data:"+key, "old", l.Token()))

				type res struct {
					l   *lease.Lease
					err error
				}
				got := make(chan res, 1)
				if form == "hash" {
					// A waiter queued: the lock becomes the hash.
					go func() {
						w, err := waiter.Acquire(ctx, key, option.Retry(10*time.Second, 10*time.Second))
						got <- res{w, err}
					}()
					waitSubscribed(t, srv, "dlock:{"+key+"}:released")
					require.Eventually(t, func() bool {
						typ, _ := srv.Do("TYPE", "dlock:{"+key+"}")
						w, _ := srv.LockField("dlock:{"+key+"}", "waiting")
						return typ == "hash" && w == "1"
					}, 5*time.Second, 5*time.Millisecond, "waiter queued")
				}

				br, err := op.ForceRelease(ctx, key)
				require.NoError(t, err, "ForceRelease")
				t.Logf("broken: %+v", br)
				if !br.Held || br.Owner != l.Owner() || br.Metadata != "host=a" || br.Was != l.Token() || br.Token <= l.Token() {
					t.Fatalf("Broken = %+v; want held by %q (host=a) at %v, and a token above", br, l.Owner()[:8], l.Token())
				}
				if !rec.Has(observe.ForceReleased, nil) {
					t.Fatalf("observer heard %v; want a ForceReleased", events.Kinds(rec.Take()))
				}

				// The holder loses its lease at its next renewal.
				select {
				case <-l.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("the holder's lease did not end after the break")
				}
				if err := l.Err(); !errors.Is(err, lease.ErrLost) {
					t.Fatalf("holder's lease ended with %v; want ErrLost", err)
				}
				if err := l.Extend(ctx, time.Second); !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("holder's Extend: %v; want ErrNotHeld", err)
				}

				// The fences, shown the break's token, refuse the old holder.
				require.NoError(t, guard.Admit(key, br.Token), "guard, the break's token")
				require.NoError(t, store.Put(ctx, "data:"+key, "break", br.Token), "store, the break's token")
				if err := guard.Admit(key, l.Token()); !errors.Is(err, fence.ErrStale) {
					t.Fatalf("guard, old holder: %v; want ErrStale", err)
				}
				if err := store.Put(ctx, "data:"+key, "late", l.Token()); !errors.Is(err, fence.ErrStale) {
					t.Fatalf("store, old holder: %v; want ErrStale", err)
				}

				// The next holder: the waiter, woken, or a claim.
				var next *lease.Lease
				if form == "hash" {
					select {
					case r := <-got:
						require.NoError(t, r.err, "the waiter")
						next = r.l
					case <-time.After(5 * time.Second):
						t.Fatal("the waiter was not woken by the break")
					}
				} else {
					next, err = waiter.TryAcquire(ctx, key)
					require.NoError(t, err, "claim after the break")
				}
				defer next.Release(ctx)
				if next.Token() <= br.Token {
					t.Fatalf("next holder's token %v; want above the break's %v", next.Token(), br.Token)
				}
				require.NoError(t, store.Put(ctx, "data:"+key, "next", next.Token()), "store, next holder")
			})
		})
	}
}

func TestForceReleaseFree(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		ctx := t.Context()
		lk := newLocker(t, n)
		br, err := lk.ForceRelease(ctx, "nobody")
		require.NoError(t, err)
		if br.Held || br.Owner != "" || br.Was != 0 || br.Token == 0 {
			t.Fatalf("Broken of a key never locked = %+v; want not held, a token", br)
		}
		again, err := lk.ForceRelease(ctx, "nobody")
		require.NoError(t, err)
		if again.Held || again.Was != br.Token || again.Token <= br.Token {
			t.Fatalf("second break = %+v; want not held, was %v, a token above it", again, br.Token)
		}
		l, err := lk.TryAcquire(ctx, "nobody")
		require.NoError(t, err, "the key stays free to claim")
		if l.Token() <= again.Token {
			t.Fatalf("token %v after breaks; want above %v", l.Token(), again.Token)
		}
		require.NoError(t, l.Release(ctx))
		if _, err := lk.ForceRelease(ctx, ""); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("ForceRelease of an empty key: %v; want ErrInvalid", err)
		}
	})
}

// TestResumeUnreachable: with the server stopped (SIGSTOP), Resume and
// Extend fail with an error that keeps the deadline recognisable and does
// not match ErrNotHeld: no answer is no lease ended. Once the server
// continues, the handle resumes and the lease extends. go-redis is set up
// as dlock.Open sets it up, ending each call at its context's deadline.
func TestResumeUnreachable(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			n := redistest.NodeFor(t, client, srv.Addr())
			if client == "go-redis" {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true})
				t.Cleanup(func() { _ = c.Close() })
				n = goredis.New(c)
			}
			resumeUnreachable(t, srv, n)
		})
	}
}

func resumeUnreachable(t *testing.T, srv *redistest.Server, n node.Node) {
	ctx := t.Context()
	a := newLocker(t, n)
	l, err := a.TryAcquire(ctx, "away", option.TTL(10*time.Second))
	require.NoError(t, err)
	h, err := l.Handle()
	require.NoError(t, err)

	cont := srv.PauseOnce()
	defer cont()
	unknown := func(what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, lease.ErrNotHeld) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with the server stopped: %v; want a deadline, not ErrNotHeld", what, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = a.Resume(short, h.String())
	cancel()
	unknown("Resume", err)
	short, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
	unknown("Extend", l.Extend(short, 10*time.Second))
	cancel()
	if err := l.Err(); err != nil {
		t.Fatalf("the lease ended (%v) on an Extend the server did not answer", err)
	}
	cont()

	r, err := a.Resume(ctx, h.String())
	require.NoError(t, err, "Resume once the server continues")
	require.NoError(t, r.Extend(ctx, 10*time.Second), "Extend of the resumed lease")
	require.NoError(t, r.Release(ctx))
}

// TestResumeAfterClockStepBack: a lease granted while the server's clock
// ran ahead lives on the server past its TTL once the clock steps back, and
// a Resume then says what the server has left, more than the TTL; an
// Extend restarts it at a TTL from its call. Another Locker is granted the
// lock only once the extended lease has ended by its holder's clock, and
// before the end the Resume gave: the checker judges a holder by its last
// look at its lease (it saw an overlap here when it took the latest).
func TestResumeAfterClockStepBack(t *testing.T) {
	srv, clock := redistest.StartClocked(t)
	ctx := t.Context()
	const ttl = 2 * time.Second
	a := newLocker(t, redistest.NodeFor(t, redistest.Clients[0], srv.Addr()), option.TTL(ttl))
	b := newLocker(t, redistest.NodeFor(t, redistest.OpenClients[1], srv.Addr()), option.TTL(ttl))
	res := safety.NewResource("stepped")

	clock.Jump(4 * time.Second)
	l, err := a.TryAcquire(ctx, "stepped")
	require.NoError(t, err)
	res.Granted(l)
	h, err := l.Handle()
	require.NoError(t, err)
	clock.Reset()

	r, err := b.Resume(ctx, h.String())
	require.NoError(t, err, "Resume")
	res.Held(r)
	resumed := time.Now().Add(r.TTL())
	if left := r.TTL(); left <= ttl+time.Second {
		t.Fatalf("resumed TTL() = %v; want the server's 4s more than the TTL %v, less the time since", left, ttl)
	}
	require.NoError(t, r.Extend(ctx, ttl), "Extend")
	res.Held(r)
	if left := r.TTL(); left > ttl {
		t.Fatalf("TTL() after Extend(%v) = %v", ttl, left)
	}

	wctx, cancel := context.WithTimeout(ctx, 3*ttl)
	defer cancel()
	next, err := a.Acquire(wctx, "stepped")
	require.NoError(t, err, "the next holder's Acquire")
	res.Granted(next)
	at := time.Now()
	defer next.Release(ctx)
	if r.Err() == nil {
		t.Fatalf("the next holder was granted the lock while the extended lease was still valid (%v left)", r.TTL())
	}
	if !at.Before(resumed) {
		t.Fatalf("granted at %s, after the resumed end %s: the case is not the one under test", safety.Stamp(at), safety.Stamp(resumed))
	}
	res.Released(r) // after the next grant, as a holder that let it run out
	if rep := res.Check(); rep.Overlaps != 0 {
		t.Fatalf("the checker saw %s", rep)
	}
}
