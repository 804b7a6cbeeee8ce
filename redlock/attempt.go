package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/fence"
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

// attemptState tells a late "yes" whether it must be undone: when the
// attempt failed, or its lease has already ended. A late answer waits for
// the attempt's outcome: undoing it before would race with the attempt's
// own release, which may reach the node on another connection first.
type attemptState struct {
	decided chan struct{} // closed by fail or hold
	failed  bool          // written before decided is closed
	l       *lease.Lease  // written before decided is closed
}

func newAttemptState() *attemptState { return &attemptState{decided: make(chan struct{})} }

func (s *attemptState) stale() bool {
	<-s.decided
	return s.failed || s.l.Err() != nil
}

func (s *attemptState) fail() {
	s.failed = true
	close(s.decided)
}

func (s *attemptState) hold(l *lease.Lease) {
	s.l = l
	close(s.decided)
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

// attempt is one acquisition: phase 1 (vote and read counters), phase 2
// (commit the token) unless tokens are off, the validity check, and on any
// failure the release of this attempt's owner on every node.
func (lk *Locker) attempt(ctx context.Context, key string, o lease.Options) (*lease.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	q := lk.Quorum()
	owner := lease.NewOwner()
	st := newAttemptState()
	calls := []node.Call{
		{Script: epochScript, Keys: []string{epochKey}},
		{Script: acquireScript, Keys: acquireKeys(key), Args: []string{owner, strconv.FormatInt(o.TTL.Milliseconds(), 10)}},
	}
	var rp *repairs
	if lk.repairs() {
		rp = lk.newRepairs()
	}

	t1 := time.Now()
	r := lk.fanout(ctx, lk.all(), lk.cfg.nodeTimeout,
		func(ctx context.Context, i int) ([]node.Result, error) {
			res, _, err := lk.nodes[i].Pipeline(ctx, calls, node.Wait{})
			if rp != nil {
				rp.add(i, res, err)
			}
			return res, err
		},
		func(a result) {
			if a.err == nil && len(a.res) == 2 && a.res[1].Err == nil && a.res[1].Reply.Int(0) == 1 && st.stale() {
				lk.releaseOne(a.i, key, owner)
			}
		})
	votes := make([]vote, len(lk.nodes))
	for pending := len(lk.nodes); pending > 0; pending-- {
		// Stop once the quorum is reached, or out of reach and whether a
		// majority holds the lock for another owner is known: a wait
		// that ends must tell a taken lock from missing answers.
		n, held := tally(votes)
		if n >= q || n+pending < q && (held >= q || held+pending < q) {
			break
		}
		a := r.next()
		votes[a.i] = lk.readVote(a)
		if lk.cfg.observer != nil {
			lk.observeVote(key, &votes[a.i], a.rtt)
		}
	}
	r.abandon()

	fail := func(op string, got int, answers []NodeAnswer, reason error) (*lease.Lease, time.Duration, error) {
		st.fail()
		// Wait only where the lock may be set and the node is alive: a
		// node that failed or timed out is released in the background, so
		// a dead node does not hold up the failure.
		lk.releaseAll(ctx, key, owner, false, func(i int) bool {
			return !votes[i].answered || votes[i].set
		})
		return nil, holdHint(votes), newQuorumError(op, key, got, q, answers, reason)
	}

	voters := make([]int, 0, len(votes))
	for i := range votes {
		if votes[i].counts() {
			voters = append(voters, i)
		}
	}
	if len(voters) < q {
		return fail("acquire", len(voters), lk.phase1Answers(votes), nil)
	}

	var token int64
	if !lk.cfg.noTokens {
		// Every counter read may raise the token, never lower it; the
		// voters alone, a majority, already meet every earlier commit.
		var maxCounter int64
		times := make([]int64, 0, len(voters))
		for _, v := range votes {
			if v.read {
				maxCounter = max(maxCounter, v.counter)
			}
		}
		for _, i := range voters {
			times = append(times, votes[i].now)
		}
		token = tokenFor(maxCounter, times)
		if answers, got := lk.commit(ctx, key, owner, token, votes, voters); got < q {
			return fail("commit", got, answers, nil)
		}
	}

	t2 := time.Now()
	validity := lease.Validity(o.TTL, t2.Sub(t1), lease.Drift(o.TTL, lk.cfg.drift))
	if validity <= 0 {
		return fail("acquire", len(voters), lk.phase1Answers(votes),
			fmt.Errorf("%w: took %v of a %v TTL", ErrNoValidity, t2.Sub(t1), o.TTL))
	}
	l := lease.New(&backend{lk: lk}, lease.Grant{
		Key:      key,
		Owner:    owner,
		Token:    fence.Token(token),
		TTL:      o.TTL,
		Until:    t2.Add(validity),
		Strategy: strategy,
		Observer: lk.cfg.observer,
	}, o.AutoRenew)
	st.hold(l)
	return l, 0, nil
}

// readVote parses one node's phase 1 answer.
func (lk *Locker) readVote(a result) vote {
	if a.err != nil {
		return vote{answered: true, answer: answerOf(lk.names[a.i], a)}
	}
	return lk.parseVote(a.i, a.res)
}

// parseVote parses the replies of node i to phase 1.
func (lk *Locker) parseVote(i int, res []node.Result) vote {
	name := lk.names[i]
	v := vote{answered: true}
	if len(res) != 2 {
		v.answer = NodeAnswer{Node: name, Kind: KindError, Err: fmt.Errorf("redlock: pipeline gave %d results, want 2", len(res))}
		return v
	}
	for _, r := range res {
		if r.Err != nil {
			v.answer = NodeAnswer{Node: name, Kind: KindError, Err: r.Err}
			return v
		}
	}
	ep, acq := res[0].Reply, res[1].Reply
	epoch, now := ep.Str(0), ep.Str(1)
	e, err1 := strconv.ParseInt(epoch, 10, 64)
	n, err2 := strconv.ParseInt(now, 10, 64)
	var err3 error
	if len(acq) == 5 {
		v.high, err3 = strconv.ParseInt(acq.Str(2), 10, 64)
	}
	if err := errors.Join(err1, err2, err3); err != nil || len(acq) != 5 {
		v.answer = NodeAnswer{Node: name, Kind: KindError, Err: fmt.Errorf("redlock: unexpected reply %v %v: %w", ep, acq, err)}
		return v
	}
	v.read = true
	v.epoch = epoch
	v.set = acq.Int(0) == 1
	v.counter = acq.Int(1)
	v.repaired = !lk.cfg.guard || lk.cfg.noTokens || acq.Str(3) == epoch
	if v.set {
		v.now = acq.Int(4)
		v.answer = NodeAnswer{Node: name, Kind: KindOK}
	} else {
		v.pttl = acq.Int(4)
		v.answer = NodeAnswer{Node: name, Kind: KindHeld}
	}
	switch {
	case lk.cfg.guard && n-e < lk.cfg.maxTTL.Microseconds():
		v.lost = true
		v.answer = NodeAnswer{Node: name, Kind: KindLostData,
			Err: fmt.Errorf("%w (%v ago)", errLostData, time.Duration(n-e)*time.Microsecond)}
	case v.set && !v.repaired:
		v.answer = NodeAnswer{Node: name, Kind: KindLostData, Err: errNotRepaired}
	}
	return v
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
// or cannot.
func (lk *Locker) commit(ctx context.Context, key, owner string, token int64, votes []vote, voters []int) ([]NodeAnswer, int) {
	q := lk.Quorum()
	t := strconv.FormatInt(token, 10)
	r := lk.fanout(ctx, voters, lk.cfg.nodeTimeout, lk.evalDo(commitScript, commitKeys(key), owner, t), nil)
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
		case a.res[0].Reply.Int(0) == 1:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindOK}
			got++
		case a.res[0].Reply.Int(0) == 0:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindHeld}
		default:
			answers[a.i] = NodeAnswer{Node: name, Kind: KindError, Err: fmt.Errorf("%w: counter already at or above %s", errCounterAhead, t)}
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
