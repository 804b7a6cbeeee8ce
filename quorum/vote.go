package quorum

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
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
	granted  int64      // the token a release's grant committed for this lock; 0 for none
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

// readVote parses one node's phase 1 answer, which carries more counters
// than a single lock's (see parseVote).
func (lk *Locker) readVote(a result, more int) vote {
	if a.err != nil {
		return vote{answered: true, answer: answerOf(lk.names[a.i], a)}
	}
	return lk.parseVote(a.i, a.reply, more)
}

// errBadReply is the error of a phase 1 reply of an unexpected shape. It
// names no value: replies carry tokens.
var errBadReply = errors.New("quorum: unexpected acquire reply")

// parseVote parses the reply of node i to phase 1. With tokens, a vote
// for several locks carries, after a single lock's seven values (those of
// its first lock), the counters of the more locks after the first (see
// lua/reply_set_token.lua); v.counter is the first lock's. A single
// lock's vote that took over the lock a release handed to an earlier
// attempt of its waiter carries an eighth, the token that release's grant
// committed (lua/vote.lua), read into v.granted as a grant's is.
func (lk *Locker) parseVote(i int, r node.Reply, more int) vote {
	name := lk.names[i]
	v := vote{answered: true}
	if len(r) == 4 && r.Int(0) == statusGone {
		// A refusal, in both modes four values only: the node will not
		// grant this owner or waiter, as if the lock were held.
		v.answer = NodeAnswer{Node: name, Kind: KindHeld}
		return v
	}
	want := 4
	if lk.cfg.Tokens {
		want = 7 + more
		if more == 0 && len(r) == 8 && r.Int(0) == statusSet {
			want = 8 // a take-over's granted token (lua/vote.lua)
		}
	}
	epoch := r.Str(3)
	var (
		e   int64
		err error
	)
	if !lk.cfg.Durable {
		e, err = epochTime(epoch)
	}
	if err == nil && want >= 7 {
		v.high, err = strconv.ParseInt(r.Str(5), 10, 64)
		if err == nil && (v.high < 0 || v.high > engine.MaxToken) {
			err = errBadReply
		}
	}
	if err == nil && len(r) == want {
		err = checkVoteKinds(r)
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
	if want == 8 && more == 0 {
		v.granted = r.Int(7)
	}
	v.repaired = lk.cfg.Durable || !lk.cfg.Tokens || r.Str(6) == epoch
	if v.set {
		v.now = n
		v.answer = NodeAnswer{Node: name, Kind: KindOK}
	} else {
		v.pttl = r.Int(1)
		v.answer = NodeAnswer{Node: name, Kind: KindHeld}
	}
	switch {
	case !lk.cfg.Durable && n-e < lk.sitOut.Microseconds():
		v.lost = true
		ago := time.Duration(n-e) * time.Microsecond
		v.answer = NodeAnswer{Node: name, Kind: KindSitsOut,
			Err: &SitOutError{Nodes: 1, Ago: ago, Left: lk.sitOut - ago}}
	case v.set && !v.repaired:
		v.answer = NodeAnswer{Node: name, Kind: KindSitsOut, Err: errNotRepaired}
	}
	return v
}

// checkVoteKinds checks the kinds and ranges of a vote's values that
// parseVote reads without parsing: the status, the ms left, the node's µs,
// the epoch record and, with tokens, the counters and the repaired
// record. A value of another kind would read as 0: a counter lowered, a
// status taken for "held".
func checkVoteKinds(r node.Reply) error {
	isInt := func(i int, lo, hi int64) bool { return r[i].Kind == node.Int && r[i].Int >= lo && r[i].Int <= hi }
	if !isInt(0, statusHeld, statusQueued) || !isInt(1, math.MinInt64, math.MaxInt64) ||
		!isInt(2, 0, math.MaxInt64) || r[3].Kind != node.Str {
		return errBadReply
	}
	if len(r) == 4 {
		return nil
	}
	if !isInt(4, 0, engine.MaxToken) || r[5].Kind != node.Str || r[6].Kind != node.Str {
		return errBadReply
	}
	for j := 7; j < len(r); j++ {
		if !isInt(j, 0, engine.MaxToken) {
			return errBadReply
		}
	}
	return nil
}

// epochTime returns the time, µs by the node's clock, of an epoch record
// "µs run_id" (see lua/epoch.lua).
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
