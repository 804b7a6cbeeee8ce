package quorum

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// ballot is one attempt at a lock: its owner, the calls it sends, and the
// votes it read. Late answers of its votes, read against it by the node
// workers, tell it two things.
//
// l tells a late "yes" whether it must be undone: when the attempt's lease
// has already ended. A late "yes" of a failed attempt needs nothing: the
// failure's release reached its node before it (and deleted the lock) or
// after it (and, the vote's call having failed or timed out, recorded the
// owner as gone, so the vote was refused).
//
// unsure marks, by node, a vote whose call went out and ended without an
// answer (a timeout, a broken connection): it may still run on the node,
// after a release sent on another connection. Only there does a release
// that finds no lock record the owner as gone. Elsewhere the vote has run
// before any release of the owner reaches the node: both take the same
// lane (see lane), and the release is sent after the vote's call ended,
// which is also when the mark is set, by the same worker.
type ballot struct {
	lk     *Locker
	ks     *keySet  // the lock; nil for a lease on several (set)
	set    *lockSet // the locks of a lease on several; nil for one
	o      settings.Call
	w      *waiter // nil for TryAcquire, which never joins the queue
	owner  string
	t1     time.Time     // phase 1 sent
	span   time.Duration // how long after t1 the locks last at least, when not the TTL (a handoff's)
	votes  []vote
	args   [6]string // a lock's vote's; a set's takes the first five (setArgs)
	l      atomic.Pointer[lease.Lease]
	unsure []atomic.Bool

	// Backing arrays for a quorum of up to 8 nodes: one allocation for
	// what the attempt's calls share.
	voteBuf    [8]vote
	unsureBuf  [8]atomic.Bool
	voterBuf   [8]int
	commitArgs [3]string

	// For a set: phase 1's args, and by node the counters phase 1 read
	// for the locks after the first (v.counter is the first's).
	setArgs  []string
	counters [][]int64

	// For an operator's break (ForceRelease), by node, what its phase 1
	// found there; nil for an acquisition.
	prior []prior
}

func (lk *Locker) newBallot(ks *keySet, o settings.Call, w *waiter) *ballot {
	n := len(lk.nodes)
	b := &ballot{lk: lk, ks: ks, o: o, w: w, owner: engine.OwnerValue(engine.NewOwner(), o.Metadata)}
	if n <= len(b.voteBuf) {
		b.votes, b.unsure = b.voteBuf[:n], b.unsureBuf[:n]
	} else {
		b.votes, b.unsure = make([]vote, n), make([]atomic.Bool, n)
	}
	b.args = [6]string{b.owner, lk.ms(o.TTL), "", "0", "0", "0"}
	if w != nil {
		b.args[2], b.args[3], b.args[4] = w.id, w.score, w.life
	}
	return b
}

// newSetBallot returns the ballot of one attempt at the locks of ls.
func (lk *Locker) newSetBallot(ls *lockSet, o settings.Call, w *waiter) *ballot {
	b := lk.newBallot(nil, o, w)
	b.set = ls
	b.setArgs = append(b.args[:5:5], strconv.Itoa(len(ls.ks)))
	b.counters = make([][]int64, len(lk.nodes))
	return b
}

// name names what the ballot locks, in errors and events: its key, or
// the keys of a set joined by commas.
func (b *ballot) name() string {
	if b.set != nil {
		return b.set.name
	}
	return b.ks.key
}

// more returns how many locks past the first the ballot votes for.
func (b *ballot) more() int {
	if b.set != nil {
		return len(b.set.ks) - 1
	}
	return 0
}

// note records what answer a says of its vote's call (see unsure).
func (b *ballot) note(a result) {
	if a.sent && a.err != nil {
		b.unsure[a.i].Store(true)
	}
}

// attempt is one acquisition: phase 1 (vote, read the epoch and, with
// tokens, the counters), phase 2 (commit the token) unless tokens are off,
// the validity check, and on any failure the release of this attempt's
// owner on every node where its vote may have set the lock. w is nil for
// TryAcquire, which never joins the queue.
func (lk *Locker) attempt(ctx context.Context, ks *keySet, o settings.Call, w *waiter) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return lk.run(ctx, lk.newBallot(ks, o, w))
}

// attemptSet is attempt for the locks of ls, all or none: each node votes
// for the whole set in one script, and each lock gets a token of its own.
func (lk *Locker) attemptSet(ctx context.Context, ls *lockSet, o settings.Call, w *waiter) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return lk.run(ctx, lk.newSetBallot(ls, o, w))
}

// handable reports whether a release may hand b's lock to it: b is a
// waiter's attempt at one lock (a set's waiter is only woken).
func (b *ballot) handable() bool { return b.w != nil && b.set == nil }

// run is the attempt of b (see attempt).
func (lk *Locker) run(ctx context.Context, b *ballot) (*lease.Lease, time.Duration, error) {
	if b.handable() {
		b.w.tries++
		b.args[5] = strconv.Itoa(b.w.tries)
		b.w.hands.track(b)
	}
	b.phase1(ctx)
	return lk.conclude(ctx, b)
}

// conclude is an attempt past its votes: b.votes are phase 1's answers,
// or the grants of the releases that handed the lock to b (hand.go).
func (lk *Locker) conclude(ctx context.Context, b *ballot) (*lease.Lease, time.Duration, error) {
	o := b.o
	q := lk.Quorum()
	c, _ := tally(b.votes)
	if c < q {
		return b.fail(ctx, "acquire", c, lk.phase1Answers(b.votes), sitOutReason(b.votes, q))
	}
	// The votes' locks last a TTL from b.t1 at least, a handoff's the
	// shorter b.span.
	span := o.TTL
	if b.span > 0 {
		span = b.span
	}
	drift := settings.Drift(o.TTL, lk.cfg.Drift)
	var (
		token    int64
		tokenArg string
		tokens   []int64 // a set's, by lock
	)
	if lk.cfg.Tokens {
		var (
			voters  []int
			req     request
			carried int
		)
		if b.set == nil {
			// Grants that committed the token (hand.go): with a majority
			// of them, the release's was the lease's only round.
			if token, voters, carried = b.grantedToken(); token == 0 {
				token, voters = b.token()
			}
			tokenArg = strconv.FormatInt(token, 10)
			b.commitArgs = [3]string{b.owner, tokenArg, lk.keep(b.o.TTL)}
			req = request{script: commitScript, keys: b.ks.commit[:], args: b.commitArgs[:]}
		} else {
			tokens, voters = b.tokens()
			args := make([]string, 2, 2+len(tokens))
			args[0], args[1] = b.owner, lk.keep(b.o.TTL)
			for _, t := range tokens {
				args = append(args, strconv.FormatInt(t, 10))
			}
			req = request{script: commitSetScript, keys: b.set.commit, args: args}
		}
		// A commit that outlasts the validity left after phase 1 could
		// only end in a lease with none: it is not waited for past that.
		if need := q - carried; need > 0 {
			el := time.Since(b.t1)
			left := engine.Validity(span, el, drift)
			if left <= 0 {
				return b.fail(ctx, "acquire", c, lk.phase1Answers(b.votes), noValidity(el, span))
			}
			if answers, got := b.commit(ctx, req, min(lk.nodeTimeout(o.TTL), left), voters, need); got < need {
				if el = time.Since(b.t1); engine.Validity(span, el, drift) <= 0 {
					return b.fail(ctx, "acquire", c, lk.phase1Answers(b.votes), noValidity(el, span))
				}
				return b.fail(ctx, "commit", got+carried, answers, nil)
			}
		}
	}
	t2 := time.Now()
	validity := engine.Validity(span, t2.Sub(b.t1), drift)
	if validity <= 0 {
		return b.fail(ctx, "acquire", c, lk.phase1Answers(b.votes), noValidity(t2.Sub(b.t1), span))
	}
	if b.set != nil {
		return b.grantSet(tokens, t2.Add(validity)), 0, nil
	}
	return b.grant(token, tokenArg, t2.Add(validity)), 0, nil
}

// phase1 sends the vote to every node and reads the answers until the
// quorum is reached, or out of reach and whether a majority holds the lock
// for another owner is known: a wait that ends must tell a taken lock from
// missing answers. Answers that come later are read against the ballot:
// they may repair a node, or undo a "yes" whose lease has ended.
func (b *ballot) phase1(ctx context.Context) {
	lk, n, q := b.lk, len(b.lk.nodes), b.lk.Quorum()
	tokens := lk.cfg.Tokens
	more := b.more()
	var rp *repairs
	if lk.repairs() {
		rp = lk.newRepairs(more)
	}
	var req request
	if b.set == nil {
		req = request{script: voteScripts.of(tokens, !lk.cfg.Durable), keys: b.ks.acquire(tokens), args: b.args[:]}
		if b.prior != nil {
			req.script = forceScripts.of(tokens, !lk.cfg.Durable)
		}
	} else {
		req = request{script: voteSetScripts.of(tokens, !lk.cfg.Durable), keys: b.set.vote, args: b.setArgs}
	}
	b.t1 = time.Now()
	r := lk.fanout(ctx, lk.all(), lk.nodeTimeout(b.o.TTL), req,
		func(a result) {
			a, _ = b.cut(a)
			b.note(a)
			if rp != nil {
				rp.add(a)
			}
			// The lease may have ended before this "yes" came in.
			if a.err == nil && a.reply.Int(0) == statusSet {
				if l := b.l.Load(); l != nil && l.Err() != nil {
					lk.wg.Go(func() { b.undo(ctx, a.i) })
				}
			}
		})
	defer r.abandon()
	for pending := n; pending > 0; pending-- {
		c, held := tally(b.votes)
		if c >= q || c+pending < q && (held >= q || held+pending < q) {
			return
		}
		a, found := b.cut(r.next())
		if b.prior != nil {
			b.prior[a.i] = found
		}
		if !a.synthetic {
			b.note(a)
			if rp != nil {
				rp.add(a)
			}
		}
		b.votes[a.i] = lk.readVote(a, more)
		if more > 0 && tokens && b.votes[a.i].read {
			cs := make([]int64, more)
			for j := range cs {
				cs[j] = a.reply.Int(7 + j)
			}
			b.counters[a.i] = cs
		}
		if lk.cfg.Observer != nil {
			lk.observeVote(b.name(), &b.votes[a.i], a.rtt)
		}
	}
}

// token returns the token phase 1 allows, and the voters that commit it.
// Every counter read may raise the token, never lower it; the voters alone,
// a majority, already meet every earlier commit.
func (b *ballot) token() (int64, []int) {
	var (
		maxCounter int64
		timeBuf    [8]int64 // keeps times off the heap for up to 8 nodes
	)
	voters := b.voterBuf[:0]
	times := timeBuf[:0]
	for i := range b.votes {
		if b.votes[i].read {
			maxCounter = max(maxCounter, b.votes[i].counter)
		}
		if b.votes[i].counts() {
			voters = append(voters, i)
			times = append(times, b.votes[i].now)
		}
	}
	return tokenFor(maxCounter, times), voters
}

// tokens is token for a set: each lock's token, by the same rule from the
// counters read for that lock, and the voters that commit them all.
func (b *ballot) tokens() ([]int64, []int) {
	var times []int64
	voters := b.voterBuf[:0]
	tokens := make([]int64, len(b.set.ks))
	for i := range b.votes {
		if b.votes[i].read {
			tokens[0] = max(tokens[0], b.votes[i].counter)
			for j, c := range b.counters[i] {
				tokens[j+1] = max(tokens[j+1], c)
			}
		}
		if b.votes[i].counts() {
			voters = append(voters, i)
			times = append(times, b.votes[i].now)
		}
	}
	for j, c := range tokens {
		tokens[j] = tokenFor(c, times)
	}
	return tokens, voters
}

// undo releases the ballot's owner on node i, where a vote of its set the
// lock(s) after its lease ended.
func (b *ballot) undo(ctx context.Context, i int) {
	if b.set == nil {
		b.lk.releaseOne(ctx, i, b.ks, b.owner, b.o.TTL)
		return
	}
	b.lk.releaseSetOne(ctx, i, b.set, b.owner, b.o.TTL)
}

// fail releases the ballot's owner wherever its vote may have set the
// lock: it did, or its answer was not read. It waits only where it did,
// and so the node is alive: a node that failed, timed out or was not
// awaited is released in the background (its late vote is refused), so a
// hung node does not hold up the failure and the retry behind it.
func (b *ballot) fail(ctx context.Context, op string, got int, answers []NodeAnswer, reason error) (*lease.Lease, time.Duration, error) {
	n := len(b.votes)
	idx := make([]int, 0, n)
	await := make([]bool, n)
	for i := range b.votes {
		if !b.votes[i].read || b.votes[i].set {
			idx = append(idx, i)
			await[i] = b.votes[i].set
		}
	}
	rel := releasing{owner: b.owner, unsure: b.unsure, ttl: b.o.TTL}
	if b.handable() && b.span == 0 {
		rel.refused = b.w.id
	}
	if b.set == nil {
		b.lk.releaseAll(b.ks, rel, idx, len(idx), await)
	} else {
		b.lk.releaseSet(b.set, rel, idx, len(idx), await)
	}
	return nil, holdHint(b.votes), newError(op, b.name(), got, b.lk.Quorum(), answers, reason)
}

// grant hands out the ballot's lease, valid until until, with token,
// which tokenArg spells ("" without tokens).
func (b *ballot) grant(token int64, tokenArg string, until time.Time) *lease.Lease {
	be := &backend{lk: b.lk, ks: b.ks, ttl: b.o.TTL, unsure: b.unsure, token: tokenArg}
	if b.w != nil {
		be.waiter = b.w.id
	}
	l := engine.NewLease(be, leasing.Grant{
		Key:       b.ks.key,
		Owner:     b.owner,
		Token:     fence.Token(token),
		TTL:       b.o.TTL,
		Until:     until,
		Strategy:  strategy,
		Reporter:  b.lk.cfg.Reporter,
		AutoRenew: b.o.AutoRenew,
		Metadata:  b.o.Metadata,
		Short:     b.span > 0 && b.span < b.o.TTL,
	})
	b.l.Store(l)
	return l
}

// grantSet hands out the lease of a set ballot, valid until until, with
// each lock's token (nil without tokens).
func (b *ballot) grantSet(tokens []int64, until time.Time) *lease.Lease {
	be := &backend{lk: b.lk, set: b.set, ttl: b.o.TTL, unsure: b.unsure}
	if b.w != nil {
		be.waiter = b.w.id
	}
	set := make([]leasing.Held, len(b.set.ks))
	for j, ks := range b.set.ks {
		set[j].Key = ks.key
	}
	if tokens != nil {
		be.tokens = make([]string, len(tokens))
		for j, t := range tokens {
			be.tokens[j] = strconv.FormatInt(t, 10)
			set[j].Token = fence.Token(t)
		}
	}
	l := engine.NewLease(be, leasing.Grant{
		Key:       set[0].Key,
		Owner:     b.owner,
		Token:     set[0].Token,
		Set:       set,
		TTL:       b.o.TTL,
		Until:     until,
		Strategy:  strategy,
		Reporter:  b.lk.cfg.Reporter,
		AutoRenew: b.o.AutoRenew,
		Metadata:  b.o.Metadata,
	})
	b.l.Store(l)
	return l
}

// noValidity is the reason of an attempt that took elapsed of a ttl lease
// and left it no validity.
func noValidity(elapsed, ttl time.Duration) error {
	return fmt.Errorf("%w: took %v of a %v TTL", ErrNoValidity, elapsed, ttl)
}

// commit is phase 2: req, the commit of the token (or a set's tokens), on
// the voters, until q committed or cannot: a majority, less the votes that
// carried a grant's token (grantedToken). The counters are kept the idle
// TTL past the lease. It returns how many committed and, when that is
// short of q, every node's answer.
func (b *ballot) commit(ctx context.Context, req request, timeout time.Duration, voters []int, q int) ([]NodeAnswer, int) {
	lk := b.lk
	r := lk.fanout(ctx, voters, timeout, req, nil)
	// The voters' answers, by node, are copied out only on a failure: a
	// buffer on the stack for up to 8 nodes.
	var buf [8]NodeAnswer
	ans := buf[:]
	if n := len(lk.nodes); n > len(buf) {
		ans = make([]NodeAnswer, n)
	}
	for _, i := range voters {
		ans[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
	}
	got := 0
	for pending := len(voters); pending > 0 && got < q && got+pending >= q; pending-- {
		a := r.next()
		name := lk.names[a.i]
		if a.err != nil {
			ans[a.i] = answerOf(name, a)
			continue
		}
		ans[a.i] = readCommit(name, a.reply)
		if ans[a.i].Kind == KindOK {
			got++
		}
	}
	r.abandon()
	if got >= q {
		return nil, got
	}
	answers := lk.phase1Answers(b.votes)
	for _, i := range voters {
		answers[i] = ans[i]
	}
	return answers, got
}

// readCommit reads node name's reply to a commit (commit.lua,
// commit_set.lua), which is one integer: 1 committed (KindOK), 0 the owner
// does not hold the lock (KindHeld), -1 a counter or the floor not lower
// (errCounterAhead). Any other reply is an error answer, never a commit.
func readCommit(name string, r node.Reply) NodeAnswer {
	if len(r) == 1 && r[0].Kind == node.Int {
		switch r[0].Int {
		case 1:
			return NodeAnswer{Node: name, Kind: KindOK}
		case 0:
			return NodeAnswer{Node: name, Kind: KindHeld}
		case -1:
			return NodeAnswer{Node: name, Kind: KindError, Err: errCounterAhead}
		}
	}
	return NodeAnswer{Node: name, Kind: KindError,
		Err: fmt.Errorf("%w: %d values, want one integer, 1, 0 or -1", errBadCommit, len(r))}
}

// tokenFor returns max(maxCounter+1, the lower median of times): the token
// of an acquisition that read maxCounter as the highest counter and whose
// voters' clocks read times (µs).
func tokenFor(maxCounter int64, times []int64) int64 {
	t := maxCounter + 1
	if len(times) == 0 {
		return t
	}
	var buf [8]int64 // sorts a copy of times on the stack for up to 8 voters
	s := append(buf[:0], times...)
	slices.Sort(s)
	return max(t, s[(len(s)-1)/2])
}

// holdHint is how long the lock seems to stay held by others: the shortest
// remaining time among the holders, or 0.
func holdHint(votes []vote) time.Duration {
	var h int64
	for _, v := range votes {
		if v.answered && v.answer.Kind == KindHeld && v.pttl > 0 && (h == 0 || v.pttl < h) {
			h = v.pttl
		}
	}
	return time.Duration(h) * time.Millisecond
}
