package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// AbandonKeep is how long an abandoned owner is remembered, at least
// (twice the TTL when that is longer): a claim that reaches the server
// later than that, held up in a network path or behind a paused server,
// holds what it claims for its TTL under an owner nobody uses. That costs
// one TTL of the key, never a second holder.
const AbandonKeep = 10 * time.Second

// Base is the configuration every single-server primitive takes, resolved
// by package settings from the options given to its New: the TTL of
// leases whose acquire sets none, how long a key's hash outlives its last
// lease (IdleTTL; < 0: for ever), how a blocking acquire paces its
// attempts, the share of the TTL set aside for clock drift, and the
// Observer of acquisitions and leases, with the Reporter built from it.
type Base struct{ settings.Locker }

// KeepMs is the lifetime, in ms as the scripts take it, that a lease of
// ttl gives its key's hash ("0": for ever).
func (b *Base) KeepMs(ttl time.Duration) string { return KeepMs(ttl, b.IdleTTL) }

// Until is when a lease of ttl whose claim was sent at t1 ends by the
// local clock: ttl less the drift margin, counted from before the send.
func (b *Base) Until(t1 time.Time, ttl time.Duration) time.Time {
	return t1.Add(ttl - settings.Drift(ttl, b.Drift))
}

// Refusal is the server's error reply to a claim: the script refused, or
// the server would not run it, and nothing was written. It is the one
// failure of an attempt that a blocking acquire does not retry.
type Refusal struct{ Err error }

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// ErrLate is the cause of a claim granted after its validity had run out
// on the way: it has been released again.
var ErrLate = errors.New("granted after its validity ran out on the way")

// Classify reads an attempt's outcome for a blocking acquire, which retries
// every failure but the server's refusal: a grant that came too late to
// be used is one more attempt that found the key taken; a lost connection
// or a timeout (the claim abandoned) is worth another attempt.
func Classify[T any](v T, hint time.Duration, err error) (T, time.Duration, error) {
	var (
		zero T
		r    *Refusal
	)
	switch {
	case err == nil, errors.Is(err, lease.ErrTaken):
		return v, hint, err
	case errors.Is(err, ErrLate):
		return zero, 0, fmt.Errorf("%w (%w)", lease.ErrTaken, err)
	case errors.As(err, &r):
		return zero, 0, err
	}
	return zero, 0, Retryable(err)
}

// Configure is how New of every primitive starts: it returns an
// *lease.ArgError when n is nil, then resolves opts for the primitive's
// scope (see settings.New).
func Configure(n node.Node, scope settings.Scope, opts []option.Option) (Base, error) {
	if n == nil {
		return Base{}, &lease.ArgError{Arg: "node", Value: n, Rule: "must not be nil"}
	}
	l, err := settings.New(scope, opts)
	return Base{l}, err
}

// Claim is what a claim on one hash keeps that the core reads or sends:
// a primitive's claim embeds it, with its own script arguments.
type Claim struct {
	O     settings.Call
	TTL   time.Duration // O.TTL in whole milliseconds, as the server gets it
	Keys  [1]string     // the hash
	NArgs int           // how many of the claim script's arguments a claim sends: more to join the queue when refused
	Held  [3]string     // once granted: what extend and release send
	Queue bool          // a refusal put the owner in the queue, and no grant or leave took it out since
}

// Kit is what a primitive's Locker gives each of its claims: its name (in
// errors and in its leases' events), its Node, its configuration and the
// scripts the core runs for it. A Kit is built once, by NewKit in New of
// the primitive, and only read after.
type Kit struct {
	Name string
	Node node.Node
	Base *Base
	// The primitive's scripts: Extend takes the held values, the TTL in ms
	// and the hash's lifetime in ms; Release the held values; Abandon the
	// owner and the ms to remember it; Leave the owner. A primitive whose
	// leases are not the core's sets only Abandon.
	ExtendScript, ReleaseScript, AbandonScript, LeaveScript *node.Script
	// The configured TTL's arguments, formatted once (see LeaseArgs).
	ttlMs, keepMs string
	// IdleMs is how long a released key keeps its counter, in ms as the
	// scripts take it ("0": for ever; see IdleTTL).
	IdleMs string
}

// Scripts are a primitive's scripts the core runs for it (see Kit), and
// its claim, which the primitive runs itself.
type Scripts struct{ Claim, Extend, Release, Abandon, Leave *node.Script }

// StateScripts returns the scripts of a primitive written as one state
// machine: each transition, claim, extend, release, leave and abandon, is
// lua/state.lua then lua/TRANSITION.lua of fsys, registered as
// PKG/TRANSITION (lua.Script).
func StateScripts(pkg string, fsys fs.FS) Scripts {
	return Scripts{Claim: StateScript(pkg, fsys, "claim"), Extend: StateScript(pkg, fsys, "extend"),
		Release: StateScript(pkg, fsys, "release"), Leave: StateScript(pkg, fsys, "leave"),
		Abandon: StateScript(pkg, fsys, "abandon")}
}

// StateScript is the transition of StateScripts named op.
func StateScript(pkg string, fsys fs.FS, op string) *node.Script {
	return lua.Script(lua.Spec{Name: pkg + "/" + op, FS: fsys, Body: []string{"state.lua", op + ".lua"}})
}

// NewKit returns the Kit of the primitive called name on n, configured by
// b (checked, and not changed after), with its scripts s.
func NewKit(name string, n node.Node, b *Base, s Scripts) Kit {
	return Kit{Name: name, Node: n, Base: b,
		ExtendScript: s.Extend, ReleaseScript: s.Release, AbandonScript: s.Abandon, LeaveScript: s.Leave,
		ttlMs: strconv.FormatInt(b.TTL.Milliseconds(), 10), keepMs: b.KeepMs(b.TTL), IdleMs: idleMs(b.IdleTTL)}
}

// idleMs is idle in ms as the scripts take it: at least 1, or "0" (for
// ever) when idle is negative.
func idleMs(idle time.Duration) string {
	if idle < 0 {
		return "0"
	}
	return strconv.FormatInt(max(1, idle.Milliseconds()), 10)
}

// LeaseArgs returns what a claim of a lease of ttl tells the server: ttl
// in whole milliseconds, as the server keeps it, and as arguments its ms
// and the ms the hash outlives the lease (see Base.KeepMs). Those of the
// configured TTL cost nothing: they are formatted once.
func (k *Kit) LeaseArgs(ttl time.Duration) (whole time.Duration, ttlMs, keepMs string) {
	ms := ttl.Milliseconds()
	whole = time.Duration(ms) * time.Millisecond
	if ttl == k.Base.TTL && k.ttlMs != "" {
		return whole, k.ttlMs, k.keepMs
	}
	return whole, strconv.FormatInt(ms, 10), k.Base.KeepMs(whole)
}

// Run sends one claim: script on keys with args. An error is either a
// *Refusal (the server's error reply: nothing was written) or, with lost
// true, a failure after which the claim may have landed with its reply
// lost, or may still be on its way: the caller abandons it. op and key
// name the claim in the errors (see what).
func (k *Kit) Run(ctx context.Context, script *node.Script, keys []string, args []string, op, key string) (r node.Reply, lost bool, err error) {
	r, err = k.Node.Eval(ctx, script, keys, args...)
	if err == nil {
		return r, false, nil
	}
	err = fmt.Errorf("%s: %s on %s: %w", k.Name, what(op, key), k.Node, ctxerr.Wrap(ctx, err))
	var re *node.ReplyError
	if !errors.As(err, &re) {
		return nil, true, err
	}
	return nil, false, &Refusal{err}
}

// Granted checks a grant whose claim was sent at t1 before it is handed
// to the caller, and returns when its lease of ttl ends by the local
// clock. It fails when ctx ended (not every client cuts a call short
// then; a caller that gave up must not be left holding what it does not
// know of), or when the lease's validity ran out on the way (an error
// matching ErrLate and lease.ErrExpired); the caller then releases the
// grant (ReleaseDetached).
func (k *Kit) Granted(ctx context.Context, t1 time.Time, ttl time.Duration, op, key string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("%s: %s on %s: %w", k.Name, what(op, key), k.Node, ctxerr.Wrap(ctx, err))
	}
	until := k.Base.Until(t1, ttl)
	if !time.Now().Before(until) {
		return time.Time{}, fmt.Errorf("%s: %s: %w: %w", k.Name, what(op, key), ErrLate, lease.ErrExpired)
	}
	return until, nil
}

// what names a call in an error: op and the quoted key ("claim \"k\""), or
// op alone when key is empty. Built only on the way to an error, so that a
// call that succeeds allocates nothing for it.
func what(op, key string) string {
	if key == "" {
		return op
	}
	return op + " " + strconv.Quote(key)
}

// Abandon gives up a claim of owner on keys whether or not it landed, on
// a context detached from ctx: the caller's may have ended already. The
// server refuses owner from then on (for AbandonKeep, or twice ttl) and
// takes it out of the queue: Abandon clears *queued (when not nil), and
// the caller draws a new owner.
func (k *Kit) Abandon(ctx context.Context, keys []string, owner string, ttl time.Duration, queued *bool) {
	keep := max(AbandonKeep, 2*ttl).Milliseconds()
	Cleanup(ctx, k.Node, k.AbandonScript, keys, owner, strconv.FormatInt(keep, 10))
	if queued != nil {
		*queued = false
	}
}

// Leave gives up owner's place in the queue of keys when *queued says a
// refusal put it there (no grant or leave took it out since), on a
// context detached from ctx, and clears *queued. A ticket whose leave is
// lost expires by its deadline.
func (k *Kit) Leave(ctx context.Context, keys []string, owner string, queued *bool) {
	if !*queued {
		return
	}
	Cleanup(ctx, k.Node, k.LeaveScript, keys, owner)
	*queued = false
}

// ReleaseDetached releases a grant the caller must not keep (held: what
// Release takes), on a context detached from ctx. The claim must go on
// under a new owner, which the caller draws: a release whose reply did not
// come may still be on its way, and were the next attempt, under the same
// owner, to find the grant still its own, it would be given the same
// token, which that late release would then free.
func (k *Kit) ReleaseDetached(ctx context.Context, keys []string, held []string) {
	Cleanup(ctx, k.Node, k.ReleaseScript, keys, held...)
}

// Extend runs the extend script for l (held: its owner and what else the
// script takes before the TTL) and returns the lease's new end by the
// local clock. A refusal is read by Refused.
func (k *Kit) Extend(ctx context.Context, keys []string, held []string, l *lease.Lease, ttl time.Duration) (time.Time, error) {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return time.Time{}, &lease.ArgError{Arg: "ttl", Value: ttl, Rule: "must be at least 1ms"}
	}
	ttl = time.Duration(ms) * time.Millisecond
	t1 := time.Now()
	args := append(held[:len(held):len(held)], strconv.FormatInt(ms, 10), k.Base.KeepMs(ttl))
	if _, err := k.Node.Eval(ctx, k.ExtendScript, keys, args...); err != nil {
		return time.Time{}, k.Refused(ctx, "extend", l, err)
	}
	return k.Base.Until(t1, ttl), nil
}

// Release runs the release script for l. ranAgain, when not nil, tells a
// DLSTALE refusal of a release run again after it succeeded (its reply
// lost, the client sent it again) from one of a lease that ended: the
// release then succeeded. A reply other than 1 means the lease had
// expired (lease.ErrNotHeld).
func (k *Kit) Release(ctx context.Context, keys []string, held []string, l *lease.Lease, ranAgain func(error) bool) error {
	r, err := k.Node.Eval(ctx, k.ReleaseScript, keys, held...)
	if err != nil {
		if ranAgain != nil && ranAgain(err) {
			return nil
		}
		return k.Refused(ctx, "release", l, err)
	}
	if r.Int(0) != 1 {
		return fmt.Errorf("%s: release %q: %w: it had expired", k.Name, l.Key(), lease.ErrNotHeld)
	}
	return nil
}

// Refused maps a DLSTALE reply to op on l to an error matching
// lease.ErrNotHeld, and also fence.ErrStale when the key has been granted
// again since l's grant; other errors keep their context error
// recognisable.
func (k *Kit) Refused(ctx context.Context, op string, l *lease.Lease, err error) error {
	return Refused(ctx, k.Name, op+" "+strconv.Quote(l.Key()), k.Node, l, err)
}

// Subscribe listens on channel for a waiter whose ticket lives life. A
// subscription that hangs (the server went away meanwhile) must not
// outlast half the ticket: it is given up, and wake is nil (the wait then
// polls at its retry pace). stop ends the subscription; it is never nil.
func (k *Kit) Subscribe(ctx context.Context, channel string, life time.Duration) (wake <-chan string, stop func()) {
	sctx, cancel := context.WithTimeout(ctx, life/2)
	wake, stop, err := k.Node.Subscribe(sctx, channel)
	cancel()
	if err != nil {
		return nil, func() {}
	}
	return wake, stop
}

// Waiter is one blocking acquire's side of Wait.
type Waiter struct {
	// Try makes one attempt, its outcome read as Classify reads it; hint is
	// how long until the lease in the way may end.
	Try func(ctx context.Context) (l *lease.Lease, hint time.Duration, err error)
	// Handed, when not nil, is asked first at each turn for a lease a
	// release handed the waiter (one Heed took from a message), nil for
	// none.
	Handed func() *lease.Lease
	// Heed, when not nil, reads a message of the release channel (see
	// Turn).
	Heed func(msg string) bool
	// Leave gives up the waiter's place in the queue; Wait calls it when
	// it fails.
	Leave func(ctx context.Context)
}

// Wait runs w's attempts until one grants, one fails for good or ctx
// ends, paced by r and woken early by channel. The channel is subscribed
// after the first attempt that finds the key taken, and one more attempt
// made at once: a release between the two would wake nobody otherwise.
func (k *Kit) Wait(ctx context.Context, r settings.Pace, life time.Duration, channel string, w Waiter) (*lease.Lease, error) {
	var (
		wake       <-chan string
		stop       = func() {}
		subscribed bool
	)
	l, err := Wait(ctx, r, func(ctx context.Context) (*lease.Lease, Turn, error) {
		if w.Handed != nil {
			if l := w.Handed(); l != nil {
				return l, Turn{}, nil
			}
		}
		l, hint, err := w.Try(ctx)
		if err != nil && Again(err) && !subscribed && ctx.Err() == nil {
			subscribed = true
			wake, stop = k.Subscribe(ctx, channel, life)
			l, hint, err = w.Try(ctx)
		}
		return l, Turn{Hint: hint, Wake: wake, Heed: w.Heed}, err
	})
	stop()
	if err != nil {
		w.Leave(ctx)
	}
	return l, err
}
