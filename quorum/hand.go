package quorum

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/node"
)

// The handoff (docs/quorum.md): a lease's release hands the lock, on each
// node it frees, to the head of the key's queue, as a vote for the attempt
// the head's ticket names (lua/hand.lua), and says so on the key's
// channel. The waiter counts those grants for its latest attempt and
// holds the lock once a majority granted it, with no round of its own but
// the commit of a token: the next holder is one message away from the
// release.
//
// Each grant ran on its node after the attempt's vote there (the ticket
// names the attempt only once its vote ran), so after the attempt was
// sent, and it lasts the attempt's TTL cut to the ticket's deadline, a
// ticket life after that vote at the least: the lease is counted from the
// attempt's start, over the shorter of the two. A waiter counts grants
// for its latest attempt only, and switches to a new attempt before
// sending its votes, so a grant to an attempt it gave up never counts:
// the later attempt's vote, or the waiter's leave, takes such a lock back
// (vote.lua, leave.lua). docs/models/quorum_handoff.pml checks these
// rules, and count's.

// hands is a waiter's record of the grants releases made to its latest
// attempt at one lock.
type hands struct {
	mu     sync.Mutex
	b      *ballot       // the latest attempt; nil once the wait ended
	grants []vote        // by node, the grants heard for b
	span   time.Duration // how long a grant's lock lasts at least, from b.t1
}

// track makes b, which is about to send its votes, the attempt grants
// are counted for, dropping those of the earlier one.
func (h *hands) track(b *ballot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.b = b
	if h.grants == nil {
		h.grants = make([]vote, len(b.votes))
	}
	clear(h.grants)
}

// end stops counting grants: the wait is over.
func (h *hands) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.b = nil
}

// heard reads a grant of node i for the attempt whose owner starts with
// owner (fields: the rest of the message, see lua/hand.lua), and reports
// whether a majority of the nodes granted it.
func (h *hands) heard(lk *Locker, i int, owner string, fields []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b == nil || len(h.b.owner) < engine.OwnerIDLen || h.b.owner[:engine.OwnerIDLen] != owner || h.grants[i].answered {
		return false
	}
	h.grants[i] = lk.parseGrant(i, fields)
	return h.count() >= lk.Quorum()
}

// count returns how many of the grants count. The caller holds h.mu.
func (h *hands) count() int {
	n := 0
	for i := range h.grants {
		if h.grants[i].counts() {
			n++
		}
	}
	return n
}

// take returns the attempt a majority granted the lock to, its votes
// those grants, when enough of the lease is left to be worth it (half its
// span; otherwise a new attempt takes the granted locks back, and the
// lease in full); nil otherwise. The attempt is then no longer tracked.
// It runs after the attempt failed, whose release left every lock handed
// to it where it was (lua/release.lua).
func (h *hands) take(q int) *ballot {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.b
	if b == nil || h.count() < q {
		return nil
	}
	h.b = nil
	if time.Since(b.t1) > h.span/2 {
		return nil
	}
	copy(b.votes, h.grants)
	b.span = h.span
	return b
}

// parseGrant reads node i's grant, 'now µs|epoch record', with tokens
// then '|counter|high|repaired|token' (lua/hand.lua), as the vote it
// stands for: a node that sits out does not count, as its vote would not.
// token is the token the grant committed, empty for none; a release of a
// Locker without tokens sends none of the five.
func (lk *Locker) parseGrant(i int, fields []string) vote {
	want := 2
	if lk.cfg.Tokens {
		want = 6
	}
	if len(fields) != want {
		return vote{answered: true, answer: NodeAnswer{Node: lk.names[i], Kind: KindError, Err: errBadReply}}
	}
	var granted int64
	if lk.cfg.Tokens && fields[5] != "" {
		t, err := strconv.ParseInt(fields[5], 10, 64)
		if err != nil || t <= 0 || t > engine.MaxToken {
			return vote{answered: true, answer: NodeAnswer{Node: lk.names[i], Kind: KindError, Err: errBadReply}}
		}
		granted = t
	}
	us, err := strconv.ParseInt(fields[0], 10, 64)
	r := node.Reply{{Kind: node.Int, Int: statusSet}, {Kind: node.Int}, {Kind: node.Int, Int: us}, {Kind: node.Str, Str: fields[1]}}
	if lk.cfg.Tokens {
		c, cerr := strconv.ParseInt(fields[2], 10, 64)
		if err == nil {
			err = cerr
		}
		r = append(r, node.Value{Kind: node.Int, Int: c}, node.Value{Kind: node.Str, Str: fields[3]}, node.Value{Kind: node.Str, Str: fields[4]})
	}
	if err != nil {
		return vote{answered: true, answer: NodeAnswer{Node: lk.names[i], Kind: KindError, Err: errBadReply}}
	}
	v := lk.parseVote(i, r, 0)
	v.granted = granted
	return v
}

// grantedToken returns the token the grants of a release committed for
// this attempt (lua/hand.lua), when the lease may hold with it, and the
// voters that must commit it still (lua/commit.lua): those whose vote
// does not carry it. A vote that took over a lock handed to an earlier
// attempt of the waiter carries the token as the grant did (lua/vote.lua).
// The token is the highest such; it is 0 when none was carried, or when a
// counter read is above it, or a counted vote's equal to it where no grant
// of this waiter's set it: such a token may be another lease's (another
// waiter's grants, by the same release, commit the same). Each vote that
// carries it set it there over a lower counter, while the lock was the
// waiter's, so the lease holds with it once a majority of the counted
// votes carry it or commit it; with a majority carrying it, nothing is
// sent (docs/models/quorum_grant_token.pml). carried counts those votes.
func (b *ballot) grantedToken() (token int64, commit []int, carried int) {
	for i := range b.votes {
		if b.votes[i].counts() {
			token = max(token, b.votes[i].granted)
		}
	}
	if token == 0 {
		return 0, nil, 0
	}
	commit = b.voterBuf[:0]
	for i := range b.votes {
		v := &b.votes[i]
		switch {
		case !v.read:
		case v.counts() && v.granted == token:
			carried++
		case v.counter > token, v.counts() && v.counter == token:
			return 0, nil, 0
		case v.counts():
			commit = append(commit, i)
		}
	}
	return token, commit, carried
}

// heard reads a message of a key's release channel from node i, for the
// key's waiters l: a grant (lua/hand.lua) to one of them is counted for
// it, and wakes it once a majority granted; a grant to another waiter
// wakes nobody (the lock is held again); any other message says the lock
// came free, and wakes the earliest waiter.
func (lk *Locker) heard(l *listening, i int, msg string) {
	owner, rest, ok := strings.Cut(msg, "|")
	var fields []string
	if ok {
		fields = strings.Split(rest, "|")
	}
	lk.wmu.Lock()
	defer lk.wmu.Unlock()
	if !ok {
		wakeFirst(l)
		return
	}
	for _, w := range l.waiters {
		if w.hands.heard(lk, i, owner, fields) {
			signal(w.wake)
			return
		}
	}
}
