package permits

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzReadClaim feeds readClaim replies of every shape a Node can hand
// it: only claim.lua's grant, {token, slot}, is a grant, and only its
// refusal, {left ms, place, attempts} (no token above 2^53-1), is a
// refusal; anything else is an error, never a permit and never a panic.
func FuzzReadClaim(f *testing.F) {
	for _, r := range []node.Reply{
		fuzzreply.Ints(1, 0), fuzzreply.Ints(1<<53-1, 4), fuzzreply.Ints(1_700_000_000_000_000, 2),
		fuzzreply.Ints(1500, 0, 0), fuzzreply.Ints(0, 3, 0),
		fuzzreply.Ints(0, 0), fuzzreply.Ints(-3, 1), fuzzreply.Ints(1<<53, 0), fuzzreply.Ints(5, -1),
		{{}, {}}, {fuzzreply.Str("5"), fuzzreply.Int(0)}, fuzzreply.Ints(-1, 0, 0), fuzzreply.Ints(10, 0, 7),
		fuzzreply.Ints(10, 2, 1_700_000_000_000_000), fuzzreply.Ints(10, 2, 1<<53), fuzzreply.Ints(10, 2, -1),
		fuzzreply.Ints(1), {}, fuzzreply.Ints(1, 2, 3, 4),
	} {
		f.Add(fuzzreply.Encode(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fuzzreply.Decode(data)
		cr, err := readClaim(r)
		switch {
		case err != nil:
			if cr.granted {
				t.Fatalf("readClaim(%v) granted with an error: %v", r, err)
			}
		case cr.granted:
			if len(r) != 2 || r[0].Kind != node.Int || r[0].Int < 1 || r[0].Int >= 1<<53 ||
				r[1].Kind != node.Int || r[1].Int < 0 || r[1].Int > math.MaxInt32 {
				t.Fatalf("readClaim(%v) granted token %d, slot %d", r, cr.token, cr.slot)
			}
			if int64(cr.token) != r[0].Int || int64(cr.slot) != r[1].Int {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		default:
			if len(r) != 3 || r[0].Kind != node.Int || r[0].Int < 0 || r[0].Int > math.MaxInt64/int64(time.Millisecond) ||
				r[1].Kind != node.Int || r[1].Int < 0 || r[2].Kind != node.Int || r[2].Int < 0 || r[2].Int >= 1<<53 {
				t.Fatalf("readClaim(%v) read a refusal: %+v", r, cr)
			}
			if cr.left != time.Duration(r[0].Int)*time.Millisecond || cr.queued != (r[1].Int > 0) || int64(cr.attempts) != r[2].Int {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		}
	})
}

// FuzzHeed feeds a waiter any message of its name's release channel: it
// hands a permit to the waiter (a lease without a call to the server)
// only when the message is state.lua's grant to this waiter, "OWNER TOKEN
// SLOT" with OWNER the waiter's random part, TOKEN one a script can grant
// above the attempts of the waiter's latest refusal (41 here) and SLOT a
// slot >= 0, or the same marked "+" by router.hand, and the permit runs
// the whole TTL only then.
func FuzzHeed(f *testing.F) {
	const owner = "0123456789abcdef0123456789abcdef"
	for _, s := range []string{"", owner + " 42 0", owner + " 41 0", "+" + owner + " 7 0", owner + " 42 -1", owner + " 0 1", owner + " -5 1",
		owner + " 9007199254740992 1", owner + " 42", owner + " 42 1 x", "ffffffffffffffffffffffffffffffff 42 0",
		"+" + owner + " 42 0", "++" + owner + " 42 0", "+" + owner + " 42 -1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		c := &claim{seen: 41}
		c.args[0] = owner
		c.heed(msg)
		if c.handed == 0 {
			return
		}
		grant, whole := strings.CutPrefix(msg, "+")
		if c.handedWhole != whole {
			t.Fatalf("heed(%q) handed the whole TTL: %v", msg, c.handedWhole)
		}
		rest, ok := strings.CutPrefix(grant, owner+" ")
		token, slot, ok2 := strings.Cut(rest, " ")
		tk, err1 := strconv.ParseInt(token, 10, 64)
		sl, err2 := strconv.Atoi(slot)
		if !ok || !ok2 || err1 != nil || err2 != nil || tk <= 41 || tk >= 1<<53 || sl < 0 ||
			int64(c.handed) != tk || c.handedSlot != sl {
			t.Fatalf("heed(%q) handed token %d, slot %d", msg, c.handed, c.handedSlot)
		}
	})
}
