package engine

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/node"
)

// ErrBadReply matches the error of a script reply of a shape its script
// never returns (a value missing, of another kind, out of range): the
// server runs another version of the script, or something between mangled
// the reply. Such a reply grants nothing.
var ErrBadReply = errors.New("dlock: unexpected script reply")

// MaxToken is the largest token a script grants: the scripts refuse to
// count at or past 2^53, where Lua's numbers stop being exact integers.
const MaxToken = 1<<53 - 1

// maxMs is the largest count of milliseconds a time.Duration holds.
const maxMs = math.MaxInt64 / int64(time.Millisecond)

// badValue is the error of r[i], which is not what want says. It names
// the value's kind, not the value: replies carry owners and tokens.
func badValue(r node.Reply, i int, want string) error {
	got := "missing"
	if i < len(r) {
		switch r[i].Kind {
		case node.Nil:
			got = "nil"
		case node.Int:
			got = "an integer out of range"
		case node.Str:
			got = "a string"
		}
	}
	return fmt.Errorf("%w: value %d of %d is %s, want %s", ErrBadReply, i, len(r), got, want)
}

// ReplyInt returns the integer r[i], or an error matching ErrBadReply
// unless it is one from lo to hi.
func ReplyInt(r node.Reply, i int, lo, hi int64) (int64, error) {
	if i < 0 || i >= len(r) || r[i].Kind != node.Int || r[i].Int < lo || r[i].Int > hi {
		return 0, badValue(r, i, fmt.Sprintf("an integer from %d to %d", lo, hi))
	}
	return r[i].Int, nil
}

// ReplyToken returns the token r[i], or an error matching ErrBadReply
// unless it is an integer from 1 to MaxToken.
func ReplyToken(r node.Reply, i int) (fence.Token, error) {
	if i < 0 || i >= len(r) || r[i].Kind != node.Int || r[i].Int < 1 || r[i].Int > MaxToken {
		return 0, badValue(r, i, "a token (an integer from 1 to 2^53-1)")
	}
	return fence.Token(r[i].Int), nil
}

// ReplyMs returns the time r[i], in milliseconds, or an error matching
// ErrBadReply unless it is an integer >= 0 that a time.Duration holds.
func ReplyMs(r node.Reply, i int) (time.Duration, error) {
	if i < 0 || i >= len(r) || r[i].Kind != node.Int || r[i].Int < 0 || r[i].Int > maxMs {
		return 0, badValue(r, i, "a time in ms (an integer >= 0)")
	}
	return time.Duration(r[i].Int) * time.Millisecond, nil
}

// ReplyRefusal reads the refusal of a claim script that queues its
// waiters: r[0] the ms until the lease in the way may end, r[1] the
// owner's place in the queue, 1 for its head and 0 for none. It returns
// an error matching ErrBadReply unless both are so.
func ReplyRefusal(r node.Reply) (left time.Duration, place int, err error) {
	if left, err = ReplyMs(r, 0); err != nil {
		return 0, 0, err
	}
	p, err := ReplyInt(r, 1, 0, math.MaxInt32)
	return left, int(p), err
}

// ReplyLen returns an error matching ErrBadReply unless r holds n values.
func ReplyLen(r node.Reply, n int) error {
	if len(r) != n {
		return fmt.Errorf("%w: %d values, want %d", ErrBadReply, len(r), n)
	}
	return nil
}

// StaleCounter reads a script's refusal "DLSTALE <counter>": the counter
// the server holds for the key (0 when it cannot be read), and whether
// err is such a refusal.
func StaleCounter(err error) (fence.Token, bool) {
	var re *node.ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "DLSTALE ") {
		return 0, false
	}
	h, err := strconv.ParseUint(strings.TrimPrefix(re.Msg, "DLSTALE "), 10, 64)
	if err != nil {
		// ParseUint gives the largest uint64 for a number past it: a
		// counter no server holds, which would call every lease stale.
		return 0, true
	}
	return fence.Token(h), true
}
