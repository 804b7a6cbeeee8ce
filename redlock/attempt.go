package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// vote is what phase 1 learned from one node.
type vote struct {
	answered bool
	answer   NodeAnswer // KindOK only for a vote that counts
	read     bool       // the node's reply was read: counter, high, epoch are set
	set      bool       // the lock was set for this attempt's owner
	lost     bool       // the node sits out after losing its data
	repaired bool       // the node was repaired for its epoch, or needs no repair
	counter  int64      // the node's effective fence counter for the key
	high     int64      // the node's high-water mark
	epoch    string     // the node's epoch, as stored
	now      int64      // the node's clock when it set the lock, µs
	pttl     int64      // the lock's remaining time when held by another, ms
}

// attemptState is what the late answers of an attempt's votes are read
// against, and what they tell its releases.
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
type attemptState struct {
	l      atomic.Pointer[lease.Lease]
	unsure []atomic.Bool
}

// note records what answer a says of its vote's call (see unsure).
func (st *attemptState) note(a result) {
	if a.sent && a.err != nil {
		st.unsure[a.i].Store(true)
	}
}

// counts reports whether v is a vote for this attempt that counts.
func (v *vote) counts() bool { return v.answered && v.answer.Kind == KindOK }

// tally returns the number of votes that count, and of nodes that answered
// the lock is held by another owner.
func tally(votes []vote) (counted, held int) {
	for i := range votes {
		switch {
		case votes[i].counts():
			counted++
		case votes[i].answered && votes[i].answer.Kind == KindHeld:
			held++
		}
	}
	return counted, held
}

// waiter is one Acquire's place in the queues of the nodes: its id and
// score (the time of its first attempt, µs, by the local clock; ties are
// broken by id) stay the same across its attempts, so it keeps its place.
type waiter struct {
	id     string
	at     int64 // the score, µs
	score  string
	wake   chan<- struct{}
	life   string // how long a ticket outlives the attempt that refreshed it (acquire.TicketLife), ms
	queued bool   // an attempt was refused: the waiter may hold a ticket on any node
}

// attempt is one acquisition: phase 1 (vote, read the epoch and, with
// tokens, the counters), phase 2 (commit the token) unless tokens are off,
// the validity check, and on any failure the release of this attempt's
// owner on every node where its vote may have set the lock. w is nil for
// TryAcquire, which never joins the queue.
func (lk *Locker) attempt(ctx context.Context, ks *keySet, o lease.Options, w *waiter) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	q := lk.Quorum()
	n := len(lk.nodes)
	tokens := !lk.cfg.noTokens
	owner := acquire.NewOwner()
	timeout := lk.nodeTimeout(o.TTL)
	// One allocation for what the attempt's calls share.
	buf := &struct {
		st     attemptState
		args   [5]string
		votes  [8]vote
		unsure [8]atomic.Bool
	}{}
	st := &buf.st
	if n <= len(buf.unsure) {
		st.unsure = buf.unsure[:n]
	} else {
		st.unsure = make([]atomic.Bool, n)
	}
	buf.args = [5]string{owner, strconvMs(o.TTL), "", "0", "0"}
	if w != nil {
		buf.args[2], buf.args[3], buf.args[4] = w.id, w.score, w.life
	}
	votes := buf.votes[:0]
	if n <= len(buf.votes) {
		votes = buf.votes[:n]
	} else {
		votes = make([]vote, n)
	}
	script := acquireScriptFor(tokens, lk.cfg.guard)
	var rp *repairs
	if lk.repairs() {
		rp = lk.newRepairs()
	}

	drift := acquire.Drift(o.TTL, lk.cfg.drift)
	t1 := time.Now()
	r := lk.fanout(ctx, lk.all(), timeout, request{script: script, keys: ks.acquire(tokens), args: buf.args[:]}, func(a result) {
		st.note(a)
		if rp != nil {
			rp.add(a)
		}
		// The lease may have ended before this "yes" came in.
		if a.err == nil && a.reply.Int(0) == statusSet {
			if l := st.l.Load(); l != nil && l.Err() != nil {
				lk.wg.Go(func() { lk.releaseOne(a.i, ks, owner, o.TTL) })
			}
		}
	})
	for pending := n; pending > 0; pending-- {
		// Stop once the quorum is reached, or out of reach and whether a
		// majority holds the lock for another owner is known: a wait
		// that ends must tell a taken lock from missing answers.
		c, held := tally(votes)
		if c >= q || c+pending < q && (held >= q || held+pending < q) {
			break
		}
		a := r.next()
		if !a.synthetic {
			st.note(a)
			if rp != nil {
				rp.add(a)
			}
		}
		votes[a.i] = lk.readVote(a)
		if lk.cfg.observer != nil {
			lk.observeVote(ks.key, &votes[a.i], a.rtt)
		}
	}
	r.abandon()

	fail := func(op string, got int, answers []NodeAnswer, reason error) (*lease.Lease, time.Duration, error) {
		// Release wherever the vote may have set the lock: it did, or its
		// answer was not read. Wait only where it did, and so the node is
		// alive: a node that failed, timed out or was not awaited is
		// released in the background (its late vote is refused), so a hung
		// node does not hold up the failure and the retry behind it.
		idx := make([]int, 0, n)
		await := make([]bool, n)
		for i := range votes {
			if !votes[i].read || votes[i].set {
				idx = append(idx, i)
				await[i] = votes[i].set
			}
		}
		lk.releaseAll(ctx, ks, releasing{owner: owner, unsure: st.unsure, ttl: o.TTL}, idx, len(idx), await)
		return nil, holdHint(votes), newQuorumError(op, ks.key, got, q, answers, reason)
	}

	c, _ := tally(votes)
	if c < q {
		return fail("acquire", c, lk.phase1Answers(votes), nil)
	}

	var token int64
	if tokens {
		// Every counter read may raise the token, never lower it; the
		// voters alone, a majority, already meet every earlier commit.
		var maxCounter int64
		voters := make([]int, 0, n)
		times := make([]int64, 0, n)
		for i := range votes {
			if votes[i].read {
				maxCounter = max(maxCounter, votes[i].counter)
			}
			if votes[i].counts() {
				voters = append(voters, i)
				times = append(times, votes[i].now)
			}
		}
		token = tokenFor(maxCounter, times)
		// A commit that outlasts the validity left after phase 1 could
		// only end in a lease with none: it is not waited for past that.
		el := time.Since(t1)
		left := acquire.Validity(o.TTL, el, drift)
		if left <= 0 {
			return fail("acquire", c, lk.phase1Answers(votes), noValidity(el, o.TTL))
		}
		if answers, got := lk.commit(ctx, ks, owner, token, o.TTL, min(timeout, left), votes, voters); got < q {
			if el = time.Since(t1); acquire.Validity(o.TTL, el, drift) <= 0 {
				return fail("acquire", c, lk.phase1Answers(votes), noValidity(el, o.TTL))
			}
			return fail("commit", got, answers, nil)
		}
	}

	t2 := time.Now()
	validity := acquire.Validity(o.TTL, t2.Sub(t1), drift)
	if validity <= 0 {
		return fail("acquire", c, lk.phase1Answers(votes), noValidity(t2.Sub(t1), o.TTL))
	}
	b := &backend{lk: lk, ks: ks, ttl: o.TTL, unsure: st.unsure}
	if w != nil {
		b.waiter = w.id
	}
	l := lease.New(b, lease.Grant{
		Key:       ks.key,
		Owner:     owner,
		Token:     fence.Token(token),
		TTL:       o.TTL,
		Until:     t2.Add(validity),
		Strategy:  strategy,
		Observer:  lk.cfg.observer,
		AutoRenew: o.AutoRenew,
	})
	st.l.Store(l)
	return l, 0, nil
}

// noValidity is the reason of an attempt that took elapsed of a ttl lease
// and left it no validity.
func noValidity(elapsed, ttl time.Duration) error {
	return fmt.Errorf("%w: took %v of a %v TTL", ErrNoValidity, elapsed, ttl)
}

// leave takes w's tickets off the nodes at idx, in the background (the
// calls are counted in the Locker's WaitGroup, so Close waits for them):
// the waiter, acquiring leases of ttl, gave up.
func (lk *Locker) leave(ks *keySet, w *waiter, idx []int, ttl time.Duration) {
	if len(idx) == 0 {
		return
	}
	r := lk.fanout(context.Background(), idx, lk.cleanupTimeout(ttl),
		request{script: leaveScript, keys: ks.release[:4], args: []string{w.id, ks.channel}}, nil)
	r.abandon()
}

// readVote parses one node's phase 1 answer.
func (lk *Locker) readVote(a result) vote {
	if a.err != nil {
		return vote{answered: true, answer: answerOf(lk.names[a.i], a)}
	}
	return lk.parseVote(a.i, a.reply)
}

// errBadReply is the error of a phase 1 reply of an unexpected shape. It
// names no value: replies carry tokens.
var errBadReply = errors.New("redlock: unexpected acquire reply")

// parseVote parses the reply of node i to phase 1.
func (lk *Locker) parseVote(i int, r node.Reply) vote {
	name := lk.names[i]
	v := vote{answered: true}
	if r.Int(0) == statusGone {
		// A refusal, in both modes four values only: the node will not
		// grant this owner or waiter, as if the lock were held.
		v.answer = NodeAnswer{Node: name, Kind: KindHeld}
		return v
	}
	want := 4
	if !lk.cfg.noTokens {
		want = 7
	}
	epoch := r.Str(3)
	var (
		e   int64
		err error
	)
	if lk.cfg.guard {
		e, err = epochTime(epoch)
	}
	if err == nil && want == 7 {
		v.high, err = strconv.ParseInt(r.Str(5), 10, 64)
	}
	if len(r) != want || err != nil {
		v.answer = NodeAnswer{Node: name, Kind: KindError,
			Err: fmt.Errorf("%w: %d values, want %d, with an epoch record and integer marks", errBadReply, len(r), want)}
		return v
	}
	n := r.Int(2)
	v.read = true
	v.epoch = epoch
	v.set = r.Int(0) == statusSet
	v.counter = r.Int(4)
	v.repaired = !lk.cfg.guard || lk.cfg.noTokens || r.Str(6) == epoch
	if v.set {
		v.now = n
		v.answer = NodeAnswer{Node: name, Kind: KindOK}
	} else {
		v.pttl = r.Int(1)
		v.answer = NodeAnswer{Node: name, Kind: KindHeld}
	}
	switch {
	case lk.cfg.guard && n-e < lk.sitOut.Microseconds():
		v.lost = true
		v.answer = NodeAnswer{Node: name, Kind: KindLostData,
			Err: fmt.Errorf("%w (%v ago)", errLostData, time.Duration(n-e)*time.Microsecond)}
	case v.set && !v.repaired:
		v.answer = NodeAnswer{Node: name, Kind: KindLostData, Err: errNotRepaired}
	}
	return v
}

// epochTime returns the time, µs by the node's clock, of an epoch record
// "µs run_id" (see epochOf).
func epochTime(record string) (int64, error) {
	at, _, ok := strings.Cut(record, " ")
	if !ok {
		return 0, errBadReply
	}
	return strconv.ParseInt(at, 10, 64)
}

// phase1Answers lists each node's answer.
func (lk *Locker) phase1Answers(votes []vote) []NodeAnswer {
	out := make([]NodeAnswer, len(votes))
	for i, v := range votes {
		if v.answered {
			out[i] = v.answer
		} else {
			out[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
		}
	}
	return out
}

// commit is phase 2: the token on the voters, until a majority committed
// or cannot. The counters are kept the idle TTL past a lease of ttl.
func (lk *Locker) commit(ctx context.Context, ks *keySet, owner string, token int64, ttl, timeout time.Duration, votes []vote, voters []int) ([]NodeAnswer, int) {
	q := lk.Quorum()
	r := lk.fanout(ctx, voters, timeout, request{script: commitScript, keys: ks.commit[:],
		args: []string{owner, strconv.FormatInt(token, 10), lk.keep(ttl)}}, nil)
	answers := lk.phase1Answers(votes)
	for _, i := range voters {
		answers[i] = NodeAnswer{Node: lk.names[i], Kind: KindNotAwaited}
	}
	got := 0
	for pending := len(voters); pending > 0 && got < q && got+pending >= q; pending-- {
		a := r.next()
		name := lk.names[a.i]
		switch {
		case a.err != nil:
			answers[a.i] = answerOf(name, a)
		case a.reply.Int(0) == 1:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindOK}
			got++
		case a.reply.Int(0) == 0:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindHeld}
		default:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindError, Err: errCounterAhead}
		}
	}
	r.abandon()
	return answers, got
}

// tokenFor returns max(maxCounter+1, the lower median of times): the token
// of an acquisition that read maxCounter as the highest counter and whose
// voters' clocks read times (µs).
func tokenFor(maxCounter int64, times []int64) int64 {
	t := maxCounter + 1
	if len(times) == 0 {
		return t
	}
	s := slices.Clone(times)
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
