package quorum

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// prior is what a break's phase 1 found on one node before it (see
// lua/force.lua): the owner it replaced, empty for none, and that owner's
// ms left.
type prior struct {
	owner string
	pttl  int64
}

// cut takes off a break's phase 1 reply the two values force.lua adds to
// a vote's, and returns them; an acquisition's answer, or an error, is
// returned as it is.
func (b *ballot) cut(a result) (result, prior) {
	if b.prior == nil || a.err != nil {
		return a, prior{}
	}
	want := 4
	if b.lk.cfg.Tokens {
		want = 7
	}
	if len(a.reply) != want+2 || a.reply[want].Kind != node.Str {
		return a, prior{}
	}
	p := prior{owner: a.reply.Str(want), pttl: a.reply.Int(want + 1)}
	a.reply = a.reply[:want]
	return a, p
}

// ForceRelease is an operator's break: it ends whatever lease holds the
// lock on key and raises the key's token. It is a forced claim, then its
// release: phase 1 sets the lock for the break's own owner on every node
// whoever holds it (lua/force.lua) and reads the counters; the break's
// token is drawn from them and committed on a majority exactly as an
// acquisition's is, so it is above every token committed for the key
// before, the old holder's included, by the same argument; then the lock
// is released on every node, and the waiters are woken. It needs a
// majority for each phase, as an acquisition does; a break that fails
// (a *Error) may still have taken the lock from its holder on some
// nodes. The old holder's next extend is refused (lease.ErrNotHeld), and
// its auto-renewal ends the lease with lease.ErrLost.
//
// Broken names the owner found with time left on the most nodes that
// answered (Held when there was one) and its token, the highest counter
// among those nodes. A key nobody holds gets a token all the same. With
// option.Tokens(false) there is none: Broken's tokens are 0. The Locker's Observer
// hears a observe.ForceReleased event.
func (lk *Locker) ForceRelease(ctx context.Context, key string) (lease.Broken, error) {
	return engine.Forced(ctx, lk.cfg.Observer, strategy, key, lk.forceRelease)
}

func (lk *Locker) forceRelease(ctx context.Context, key string) (lease.Broken, error) {
	if err := lk.begin(); err != nil {
		return lease.Broken{}, err
	}
	defer lk.wg.Done()
	ks := newKeySet(key)
	b := lk.newBallot(ks, settings.Call{TTL: lk.cfg.TTL}, nil)
	b.prior = make([]prior, len(lk.nodes))
	b.phase1(ctx)
	q := lk.Quorum()
	if c, _ := tally(b.votes); c < q {
		_, _, err := b.fail(ctx, "force release", c, lk.phase1Answers(b.votes), sitOutReason(b.votes, q))
		return lease.Broken{}, err
	}
	br := b.broken(key)
	tokenArg := ""
	if lk.cfg.Tokens {
		token, voters := b.token()
		tokenArg = strconv.FormatInt(token, 10)
		b.commitArgs = [3]string{b.owner, tokenArg, lk.keep(lk.cfg.TTL)}
		req := request{script: commitScript, keys: ks.commit[:], args: b.commitArgs[:]}
		if answers, got := b.commit(ctx, req, lk.nodeTimeout(lk.cfg.TTL), voters, q); got < q {
			_, _, err := b.fail(ctx, "force release", got, answers, nil)
			return lease.Broken{}, err
		}
		br.Token = fence.Token(token)
	}
	rel := releasing{owner: b.owner, unsure: b.unsure, token: tokenArg, ttl: lk.cfg.TTL, publish: true}
	if answers, released, _ := lk.releaseAll(ks, rel, nil, q, nil); released == 0 {
		return lease.Broken{}, newError("force release", key, 0, q, answers, nil)
	}
	return br, nil
}

// broken reads what a break's phase 1 found: the owner with time left on
// the most nodes, and its token (the highest counter among them); with
// none, the key's last token, the highest counter read.
func (b *ballot) broken(key string) lease.Broken {
	br := lease.Broken{Key: key}
	on := make(map[string]int)
	for i, p := range b.prior {
		if p.owner != "" && p.owner != b.owner && p.pttl > 0 && b.votes[i].read {
			on[p.owner]++
		}
	}
	most := 0
	for owner, n := range on {
		if n > most || n == most && owner < br.Owner {
			br.Owner, most = owner, n
		}
	}
	br.Held = most > 0
	br.Metadata = engine.Metadata(br.Owner)
	for i, v := range b.votes {
		if v.read && (!br.Held || b.prior[i].owner == br.Owner) {
			br.Was = max(br.Was, fence.Token(v.counter))
		}
	}
	return br
}

// Resume takes up the lease a handle names (the text of a lease.Handle,
// see lease.Lease.Handle) written out by a Locker on the same nodes,
// perhaps in another process: it checks on the nodes that its owner
// still holds the lock on a majority of them (the
// scripts know a lease by its owner, unique to it) and that the handle's token is
// the one the lease committed, and returns a lease that extends and
// releases it as the one written out did, valid while a majority still
// holds it by the nodes' word (less the drift margin). opts may set
// option.AutoRenew (off by default) and option.TTL, the TTL renewals ask
// for (by default the handle's).
//
// The token is checked against the key's own fence counters on the nodes
// that hold the lease: the handle's token must be the highest of them. A node's
// counter moves only by a commit of the owner holding the lock there (or
// by a break, which takes the lock first), and the lease's commit majority
// meets every majority of holders, so that highest counter is the lease's
// token; a handle with another token, raised, lowered or zeroed, is
// refused. Without tokens (option.Tokens(false)) the token must be 0. Extend and
// Release then check the owner only: the counter cannot move while the
// owner holds the lock.
//
// A handle of another strategy or of other nodes (compared as the sorted
// addresses) is refused with an error matching lease.ErrForeignHandle.
// One whose lease has ended, or whose token is not the lease's, is refused
// with an error matching lease.ErrNotHeld: for an ended lease, a
// *Error saying that so many nodes answered that the owner does not
// hold the lock there that a majority is out of reach. When too few nodes
// answer to tell (stopped, timed out, failing), the *Error does not
// match lease.ErrNotHeld: nodes that did not answer never make a lease
// ended.
func (lk *Locker) Resume(ctx context.Context, handle string, opts ...option.Option) (*lease.Lease, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	h, err := lease.ParseHandle(handle)
	if err != nil {
		return nil, err
	}
	if err := engine.HandleFor(h, strategy, lk.servers()); err != nil {
		return nil, err
	}
	o, err := lk.options(ctx, h.Key, h.TTL, opts)
	if err != nil {
		return nil, err
	}
	if err := lk.begin(); err != nil {
		return nil, err
	}
	defer lk.wg.Done()
	t1 := time.Now()
	nodes, own, err := lk.look(ctx, h.Key)
	if err != nil {
		return nil, err
	}
	var (
		left []time.Duration
		top  fence.Token // the highest counter among the nodes that hold the lease
	)
	for i, ni := range nodes {
		if ni.Err == nil && ni.Owner == h.Owner && ni.TTL > 0 {
			left = append(left, ni.TTL)
			top = max(top, own[i])
		}
	}
	q := lk.Quorum()
	if len(left) < q {
		return nil, newError("resume", h.Key, len(left), q, inspectAnswers(nodes, h.Owner), nil)
	}
	if !lk.cfg.Tokens {
		top = 0
	}
	if h.Token != top {
		// The tokens stay out of the message, as out of every error.
		return nil, fmt.Errorf("quorum: resume %q: %w: the handle's token is not the one its lease committed on the nodes", h.Key, lease.ErrNotHeld)
	}
	// Held until fewer than a majority hold it: the quorum-th longest.
	slices.SortFunc(left, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	until := t1.Add(left[q-1] - settings.Drift(left[q-1], lk.cfg.Drift))
	if !time.Now().Before(until) {
		return nil, fmt.Errorf("quorum: resume %q: %w: too little of it is left", h.Key, lease.ErrNotHeld)
	}
	be := &backend{lk: lk, ks: newKeySet(h.Key), ttl: o.TTL, waiter: h.Waiter}
	if h.Token != 0 {
		be.token = h.Token.String()
	}
	return engine.NewLease(be, leasing.Grant{
		Key: h.Key, Owner: h.Owner, Token: h.Token, TTL: o.TTL, Until: until,
		Strategy: strategy, Reporter: lk.cfg.Reporter, AutoRenew: o.AutoRenew,
		Metadata: engine.Metadata(h.Owner),
	}), nil
}

// inspectAnswers lists, for a resume's error, each node's answer: whether
// owner holds the lock there (KindHeld: it does not).
func inspectAnswers(nodes []lease.NodeInfo, owner string) []NodeAnswer {
	out := make([]NodeAnswer, len(nodes))
	for i, ni := range nodes {
		switch {
		case ni.Err != nil:
			out[i] = NodeAnswer{Node: ni.Node, Kind: KindError, Err: ni.Err}
		case ni.Owner == owner && ni.TTL > 0:
			out[i] = NodeAnswer{Node: ni.Node, Kind: KindOK}
		default:
			out[i] = NodeAnswer{Node: ni.Node, Kind: KindHeld}
		}
	}
	return out
}

// servers names the Locker's nodes in a handle: their addresses, sorted,
// so that Lockers given the same nodes in another order agree.
func (lk *Locker) servers() string {
	names := slices.Clone(lk.names)
	slices.Sort(names)
	return strings.Join(names, ",")
}

// Handle writes the lease out (lease.Lease.Handle): a lease on one key can be written out,
// one on several cannot.
func (b *backend) Handle(l *lease.Lease) (lease.Handle, error) {
	if b.set != nil {
		return lease.Handle{}, &lease.ArgError{Arg: "lease", Value: b.set.name, Rule: "must hold one key to be written out, not several"}
	}
	return lease.Handle{Strategy: strategy, Servers: b.lk.servers(), Key: b.ks.key,
		Owner: l.Owner(), Token: l.Token(), TTL: b.ttl, Waiter: b.waiter}, nil
}
