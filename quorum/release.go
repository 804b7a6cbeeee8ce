package quorum

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
)

// cleanupTimeout bounds each node's part in a release: a few node timeouts,
// since it runs on a context detached from the caller's.
func (lk *Locker) cleanupTimeout(ttl time.Duration) time.Duration {
	return min(4*lk.nodeTimeout(ttl), 5*time.Second)
}

// goneKeep is how long a release remembers an owner it did not find (see
// releaseScript): the longest TTL a vote of that owner could set.
func (lk *Locker) goneKeep() string {
	return strconvMs(max(lk.cfg.MaxTTL, lk.cfg.TTL))
}

// keep returns how long, in ms, a fence counter is kept after a commit or
// extension for ttl: ttl plus the idle TTL, or "0" to keep it for ever.
func (lk *Locker) keep(ttl time.Duration) string {
	if lk.cfg.IdleTTL < 0 {
		return "0"
	}
	if ttl == lk.cfg.TTL {
		return lk.args.keep
	}
	return strconvMs(ttl + lk.cfg.IdleTTL)
}

// ms returns ttl in ms, as the scripts take it.
func (lk *Locker) ms(ttl time.Duration) string {
	if ttl == lk.cfg.TTL {
		return lk.args.ttl
	}
	return strconvMs(ttl)
}

// argStrings are script arguments for the Locker's default TTL, spelt out
// once by New rather than by each call.
type argStrings struct {
	ttl  string // the default TTL, ms
	keep string // keep(the default TTL), unless counters are kept for ever
	gone string // goneKeep()
	idle string // the idle TTL, ms; "-1" when counters are kept for ever
}

// releasing is what a release of one owner's votes sends.
type releasing struct {
	owner   string
	unsure  []atomic.Bool // by node, where the owner's vote may still land (see ballot); nil: nowhere
	waiter  string        // the Acquire the lease was granted to, whose ticket goes; empty for none
	token   string        // the lease's token: its release is idempotent; empty for a failed attempt's
	tokens  []string      // for a set, the token of each lock, as token; nil for a failed attempt's
	ttl     time.Duration // the lease's TTL, which bounds the release's calls
	publish bool          // hand the lock to the queue's head, or wake the next waiter
	// For a failed attempt of a waiter at one lock, the waiter: a lock a
	// release handed the attempt stays (lua/release.lua).
	refused string
}

// releaseAll runs the release script for rel on the nodes at idx (all
// when nil), detached from the caller's context and bounded by
// cleanupTimeout per node, recording the owner as gone where it does not
// hold the lock and its vote may still land. It returns once need nodes
// released the lock, or every node for which await is true (all when
// await is nil) answered; the other calls finish in the background,
// counted in the Locker's WaitGroup, which Close waits for. released
// counts the nodes that deleted the lock and those that found it gone
// with its counter still at rel.token; deleted, the first only. Nodes not
// awaited are reported as KindNotAwaited. The answers are returned only
// when no node deleted the lock: nothing else reads them.
func (lk *Locker) releaseAll(ks *keySet, rel releasing, idx []int, need int, await []bool) (answers []NodeAnswer, released, deleted int) {
	ch := ""
	if rel.publish {
		ch = ks.channel
	}
	// args and unsureArgs share one allocation.
	args := []string{rel.owner, ch, "0", rel.waiter, rel.token, rel.refused, lk.args.idle,
		rel.owner, ch, lk.args.gone, rel.waiter, rel.token, rel.refused, lk.args.idle}
	req := request{script: releaseScript, keys: ks.release[:], args: args[:7:7]}
	if rel.publish {
		// A lease's release hands the lock to the queue's head (hand.go).
		req.script, req.keys = handScripts.of(lk.cfg.Tokens, !lk.cfg.Durable), ks.acquire(lk.cfg.Tokens)
	}
	if rel.unsure != nil {
		req.unsure = rel.unsure
		req.unsureArgs = args[7:]
	}
	return lk.releaseRound(req, rel.ttl, idx, need, await)
}

// releaseSet is releaseAll for the locks of a set; its script does not
// tell a lock deleted from one gone with its counter at the token, and
// both count as deleted.
func (lk *Locker) releaseSet(ls *lockSet, rel releasing, idx []int, need int, await []bool) (answers []NodeAnswer, released, deleted int) {
	pub := ""
	if rel.publish {
		pub = "1"
	}
	args := releaseSetArgs(ls, rel.owner, pub, "0", rel.waiter, rel.tokens)
	req := request{script: releaseSetScript, keys: ls.release, args: args}
	if rel.unsure != nil {
		req.unsure = rel.unsure
		req.unsureArgs = releaseSetArgs(ls, rel.owner, pub, lk.args.gone, rel.waiter, rel.tokens)
	}
	return lk.releaseRound(req, rel.ttl, idx, need, await)
}

// releaseSetArgs returns the arguments of releaseSetScript; tokens is nil
// for none.
func releaseSetArgs(ls *lockSet, owner, publish, remember, waiter string, tokens []string) []string {
	args := make([]string, 0, 4+2*len(ls.ks))
	args = append(args, owner, publish, remember, waiter)
	for j, ch := range ls.channels {
		t := ""
		if tokens != nil {
			t = tokens[j]
		}
		args = append(args, ch, t)
	}
	return args
}

// releaseRound sends req, a release, as releaseAll does; the calls are
// bounded for leases of ttl.
func (lk *Locker) releaseRound(req request, ttl time.Duration, idx []int, need int, await []bool) (answers []NodeAnswer, released, deleted int) {
	if idx == nil {
		idx = lk.all()
	}
	// The answers by node, copied out only when they are returned: a
	// buffer on the stack for up to 8 nodes.
	var buf [8]NodeAnswer
	n := len(lk.nodes)
	ans := buf[:min(n, len(buf))]
	if n > len(buf) {
		ans = make([]NodeAnswer, n)
	}
	for i := range ans {
		ans[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
	}
	if len(idx) == 0 {
		return slices.Clone(ans), 0, 0
	}
	// Background, not context.WithoutCancel(ctx): a round reads only its
	// context's cancellation, and this saves an allocation.
	r := lk.fanout(context.Background(), idx, lk.cleanupTimeout(ttl), req, nil)
	waiting := 0
	for _, i := range idx {
		if await == nil || await[i] {
			waiting++
		}
	}
	for got := 0; got < len(idx) && waiting > 0 && released < need; got++ {
		a := r.next()
		if await == nil || await[a.i] {
			waiting--
		}
		if a.err == nil && a.reply.Int(0) == releaseGone {
			ans[a.i] = NodeAnswer{Node: lk.names[a.i], Kind: KindOK}
			released++
			continue
		}
		var ok bool
		if ans[a.i], ok = agreed(lk.names[a.i], a); ok {
			released++
			deleted++
		}
	}
	r.abandon()
	if deleted > 0 {
		return nil, released, deleted
	}
	return slices.Clone(ans), released, 0
}

// releaseGone is the release script's reply for a lock found gone with
// its counter still at the lease's token.
const releaseGone = 2

// releaseOne undoes a late grant on node i, on a context detached from
// ctx: the vote has run, and there is no late one to refuse.
func (lk *Locker) releaseOne(ctx context.Context, i int, ks *keySet, owner string, ttl time.Duration) {
	ctx, cancel := engine.Detached(ctx, lk.cleanupTimeout(ttl))
	defer cancel()
	lk.busy[i].Add(1)
	defer lk.busy[i].Add(-1)
	_, _ = lk.nodes[i].Eval(ctx, releaseScript, ks.release[:], owner, "", "0", "", "")
}

// releaseSetOne is releaseOne for the locks of a set.
func (lk *Locker) releaseSetOne(ctx context.Context, i int, ls *lockSet, owner string, ttl time.Duration) {
	ctx, cancel := engine.Detached(ctx, lk.cleanupTimeout(ttl))
	defer cancel()
	lk.busy[i].Add(1)
	defer lk.busy[i].Add(-1)
	_, _ = lk.nodes[i].Eval(ctx, releaseSetScript, ls.release, releaseSetArgs(ls, owner, "", "0", "", nil)...)
}
