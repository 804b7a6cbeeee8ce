package quorum

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// wellFormedVote says whether r has the shape vote.lua gives a vote of a
// Locker with tokens (or without) and more locks past the first: the
// status 0, 1 or 2, the lock's ms left, the node's µs, the epoch record
// ("µs run_id" under the guard), and with tokens the counter, the high
// mark and the repaired record, then the more locks' counters; or, for
// one lock set by taking over a grant, the grant's token after the seven.
func wellFormedVote(r node.Reply, tokens, guard bool, more int) bool {
	want := 4
	if tokens {
		want = 7 + more
		if more == 0 && len(r) == 8 && r[0].Kind == node.Int && r[0].Int == statusSet {
			want = 8
		}
	}
	isInt := func(i int) bool { return r[i].Kind == node.Int }
	isCounter := func(i int) bool { return isInt(i) && r[i].Int >= 0 && r[i].Int < 1<<53 }
	if len(r) != want || !isInt(0) || r[0].Int < 0 || r[0].Int > 2 || !isInt(1) ||
		!isInt(2) || r[2].Int < 0 || r[3].Kind != node.Str {
		return false
	}
	if guard {
		at, _, ok := strings.Cut(r[3].Str, " ")
		if _, err := strconv.ParseInt(at, 10, 64); !ok || err != nil {
			return false
		}
	}
	if !tokens {
		return true
	}
	if !isCounter(4) || r[5].Kind != node.Str || r[6].Kind != node.Str {
		return false
	}
	if h, err := strconv.ParseInt(r[5].Str, 10, 64); err != nil || h < 0 || h >= 1<<53 {
		return false
	}
	for j := 7; j < want; j++ {
		if !isCounter(j) {
			return false
		}
	}
	return true
}

// FuzzParseVote feeds parseVote replies of every shape a Node can hand
// it, under each mode of a Locker: a reply of another shape than
// vote.lua's is an error answer, never a vote that counts, never a
// counter read (counters raise the token), and never a panic.
func FuzzParseVote(f *testing.F) {
	epoch := fuzzreply.Str("1700000000000000 4f2a")
	for _, s := range []struct {
		r    node.Reply
		mode uint8
	}{
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch}, 0b01},
		{node.Reply{fuzzreply.Int(0), fuzzreply.Int(2500), fuzzreply.Int(1_700_000_100_000_000), epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch}, 0b01},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), fuzzreply.Str(""),
			fuzzreply.Int(7), fuzzreply.Str("0"), fuzzreply.Str(""), fuzzreply.Int(3), fuzzreply.Int(9)}, 0b1000},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), fuzzreply.Str("")}, 0b10},
		{node.Reply{fuzzreply.Int(2), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), epoch}, 0b11},
		{node.Reply{fuzzreply.Int(3), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), epoch}, 0b01},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), epoch,
			fuzzreply.Str("41"), fuzzreply.Str("41"), epoch}, 0b01},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), {}, fuzzreply.Str("")}, 0b10},
		{node.Reply{fuzzreply.Int(7), fuzzreply.Int(0), fuzzreply.Int(1), fuzzreply.Str("")}, 0b10},
		{node.Reply{fuzzreply.Int(3), fuzzreply.Int(0)}, 0b10},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), fuzzreply.Int(1_700_000_100_000_000), epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch, fuzzreply.Int(41)}, 0b00},
		{node.Reply{fuzzreply.Int(0), fuzzreply.Int(900), fuzzreply.Int(1_700_000_100_000_000), epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch, fuzzreply.Int(41)}, 0b00},
	} {
		f.Add(fuzzreply.Encode(s.r), s.mode)
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		// mode: bit 0 the guard, bit 1 no tokens, bits 2-3 the more locks.
		guard, tokens, more := mode&1 == 1, mode&2 == 0, int(mode>>2&3)
		if !tokens {
			more = 0
		}
		checkVote(t, fuzzreply.Decode(data), guard, tokens, more)
	})
}

// checkVote parses r as a vote of a Locker with the guard and tokens as
// given, on a lock and more others, and fails t unless the vote is
// answered, an error is never read, anything but a well-formed vote (or
// a gone record) is an error, and only a vote that set the lock counts.
func checkVote(t *testing.T, r node.Reply, guard, tokens bool, more int) {
	t.Helper()
	lk := &Locker{names: []string{"n0"}, cfg: settings.Locker{Durable: !guard, Tokens: tokens}, sitOut: time.Second}
	v := lk.parseVote(0, r, more)
	if !v.answered {
		t.Fatalf("parseVote(%v) left the node unanswered", r)
	}
	if v.answer.Kind == KindError {
		if v.read || v.counts() || v.answer.Err == nil {
			t.Fatalf("parseVote(%v) = %+v: an error that was read", r, v)
		}
		return
	}
	gone := len(r) == 4 && r[0].Kind == node.Int && r[0].Int == statusGone
	if !gone && !wellFormedVote(r, tokens, guard, more) {
		t.Fatalf("parseVote(%v) [guard %v, tokens %v, more %d] = %+v, not an error", r, guard, tokens, more, v)
	}
	if v.counts() && (!v.set || r[0].Int != statusSet) {
		t.Fatalf("parseVote(%v) = %+v: counts without being set", r, v)
	}
}

// FuzzReadCommit feeds readCommit replies of every shape a Node can hand
// it, as phase 2 of a lock (commit.lua) and of a set (commit_set.lua) read
// them: only the single integer 1 is a commit; the integers 0 and -1 are
// the refusals they mean; anything else is an error answer, never a
// commit, and never a panic.
func FuzzReadCommit(f *testing.F) {
	for _, r := range []node.Reply{
		{fuzzreply.Int(1)}, {fuzzreply.Int(0)}, {fuzzreply.Int(-1)}, {fuzzreply.Int(2)},
		{fuzzreply.Int(1), fuzzreply.Int(1)}, {fuzzreply.Str("1")}, {}, nil,
	} {
		f.Add(fuzzreply.Encode(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fuzzreply.Decode(data)
		a := readCommit("n0", r)
		if a.Node != "n0" {
			t.Fatalf("readCommit(%v) names node %q", r, a.Node)
		}
		one := len(r) == 1 && r[0].Kind == node.Int
		switch {
		case one && r[0].Int == 1:
			if a.Kind != KindOK || a.Err != nil {
				t.Fatalf("readCommit(%v) = %+v; want a commit", r, a)
			}
		case one && r[0].Int == 0:
			if a.Kind != KindHeld {
				t.Fatalf("readCommit(%v) = %+v; want held by another", r, a)
			}
		case one && r[0].Int == -1:
			if a.Kind != KindError || !errors.Is(a.Err, errCounterAhead) {
				t.Fatalf("readCommit(%v) = %+v; want the counter ahead", r, a)
			}
		default:
			if a.Kind != KindError || !errors.Is(a.Err, errBadCommit) {
				t.Fatalf("readCommit(%v) = %+v; want an error answer, not a commit", r, a)
			}
		}
	})
}

// FuzzParseSetVote is FuzzParseVote for a set's phase 1 (vote_set.lua with
// reply_set.lua or reply_set_token.lua), from seeds of that shape: two to
// four locks, so that the counters of the locks after the first are
// fuzzed too. A reply of another shape is an error answer, never a vote
// that counts, never a counter read.
func FuzzParseSetVote(f *testing.F) {
	epoch := fuzzreply.Str("1700000000000000 4f2a")
	now := fuzzreply.Int(1_700_000_100_000_000)
	for _, s := range []struct {
		r    node.Reply
		mode uint8
	}{
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), now, epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch, fuzzreply.Int(7)}, 0b0001},
		{node.Reply{fuzzreply.Int(0), fuzzreply.Int(900), now, epoch,
			fuzzreply.Int(41), fuzzreply.Str("50"), epoch, fuzzreply.Int(7), fuzzreply.Int(50)}, 0b0101},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), now, fuzzreply.Str(""),
			fuzzreply.Int(3), fuzzreply.Str("9"), fuzzreply.Str(""), fuzzreply.Int(9), fuzzreply.Int(2), fuzzreply.Int(1)}, 0b1000},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), now, epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch, fuzzreply.Str("7")}, 0b0001},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), now, epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch, fuzzreply.Int(1 << 53)}, 0b0001},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(0), now, epoch,
			fuzzreply.Int(41), fuzzreply.Str("41"), epoch}, 0b0001},
	} {
		f.Add(fuzzreply.Encode(s.r), s.mode)
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		// mode: bit 0 the guard, bits 2-3 the more locks past the first,
		// less one: a set has two locks at least. A set without tokens
		// replies as a single lock does (FuzzParseVote).
		guard, more := mode&1 == 1, int(mode>>2&3)+1
		checkVote(t, fuzzreply.Decode(data), guard, true, more)
	})
}
