package single

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// maxToken bounds the tokens the scripts hand out: claim.lua refuses to
// count past 2^53, where Lua numbers stop being exact integers.
const maxToken = 1<<53 - 1

// isToken says whether v is a token a script can grant.
func isToken(v node.Value) bool { return v.Kind == node.Int && v.Int >= 1 && v.Int <= maxToken }

// isMs says whether v is a time left that a time.Duration holds.
func isMs(v node.Value) bool {
	return v.Kind == node.Int && v.Int >= 0 && v.Int <= math.MaxInt64/int64(time.Millisecond)
}

// FuzzReadClaim feeds readClaim replies of every shape a Node can hand
// it: only claim.lua's grant, a lone token, is a grant, and only its
// refusals, {left ms, place, attempts}, integers >= 0 with attempts no
// token above 2^53-1, and {left ms, place}, read with attempts at
// 2^53-1, are refusals; anything else is an error, never a lease and
// never a panic.
func FuzzReadClaim(f *testing.F) {
	for _, r := range []node.Reply{
		fuzzreply.Ints(1), fuzzreply.Ints(maxToken), fuzzreply.Ints(1_700_000_000_000_000),
		fuzzreply.Ints(1500, 0), fuzzreply.Ints(0, 3),
		fuzzreply.Ints(0), fuzzreply.Ints(-1), fuzzreply.Ints(maxToken + 1),
		{fuzzreply.Str("12")}, {{}}, {}, fuzzreply.Ints(1, 2, 3),
		fuzzreply.Ints(-5, 0), fuzzreply.Ints(math.MaxInt64, 0), fuzzreply.Ints(10, -1),
		{fuzzreply.Str("10"), fuzzreply.Int(0)},
		fuzzreply.Ints(1500, 2, 1_700_000_000_000_000), fuzzreply.Ints(0, 0, 0), fuzzreply.Ints(0, 1, -1),
		fuzzreply.Ints(0, 1, maxToken+1), {fuzzreply.Int(0), fuzzreply.Int(1), fuzzreply.Str("7")}, fuzzreply.Ints(1, 2, 3, 4),
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
			if len(r) != 1 || !isToken(r[0]) {
				t.Fatalf("readClaim(%v) granted token %d", r, cr.token)
			}
			if int64(cr.token) != r[0].Int {
				t.Fatalf("readClaim(%v) = token %d", r, cr.token)
			}
		default:
			if len(r) < 2 || len(r) > 3 || !isMs(r[0]) || r[1].Kind != node.Int || r[1].Int < 0 || r[1].Int > math.MaxInt32 ||
				len(r) == 3 && (r[2].Kind != node.Int || r[2].Int < 0 || r[2].Int > maxToken) {
				t.Fatalf("readClaim(%v) read a refusal: %+v", r, cr)
			}
			attempts := int64(maxToken)
			if len(r) == 3 {
				attempts = r[2].Int
			}
			if cr.left != time.Duration(r[0].Int)*time.Millisecond || cr.pos != int(r[1].Int) || int64(cr.attempts) != attempts {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		}
	})
}

// FuzzReadClaimAll is FuzzReadClaim for a set of n keys: only n tokens
// are a grant, only {-1, left ms, 0 or 1} a refusal.
func FuzzReadClaimAll(f *testing.F) {
	for _, s := range []struct {
		r node.Reply
		n uint8
	}{
		{fuzzreply.Ints(7, 9), 2}, {fuzzreply.Ints(5), 1}, {fuzzreply.Ints(-1, 300, 0), 2},
		{fuzzreply.Ints(-1, 0, 1), 3}, {fuzzreply.Ints(7, 9), 3}, {fuzzreply.Ints(0, 9), 2},
		{fuzzreply.Ints(-1), 1}, {fuzzreply.Ints(-1, 5), 2}, {fuzzreply.Ints(-1, -5, 0), 2},
		{node.Reply{fuzzreply.Int(3), fuzzreply.Str("4")}, 2}, {node.Reply{}, 0},
		{fuzzreply.Ints(-1, 300, 2), 3}, {fuzzreply.Ints(maxToken+1, 1), 2},
	} {
		f.Add(fuzzreply.Encode(s.r), s.n)
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		keys := int(n)
		if keys < 1 || keys > MaxKeys {
			keys = 1 + keys%MaxKeys
		}
		r := fuzzreply.Decode(data)
		sr, err := readClaimAll(r, keys)
		switch {
		case err != nil:
			if sr.granted {
				t.Fatalf("readClaimAll(%v, %d) granted with an error: %v", r, keys, err)
			}
		case sr.granted:
			if len(r) != keys || len(sr.tokens) != keys {
				t.Fatalf("readClaimAll(%v, %d) granted %d tokens", r, keys, len(sr.tokens))
			}
			for i, v := range r {
				if !isToken(v) || int64(sr.tokens[i]) != v.Int {
					t.Fatalf("readClaimAll(%v, %d) granted tokens %v", r, keys, sr.tokens)
				}
			}
		default:
			if len(r) != 3 || r[0].Kind != node.Int || r[0].Int != -1 || !isMs(r[1]) ||
				r[2].Kind != node.Int || r[2].Int != 0 && r[2].Int != 1 {
				t.Fatalf("readClaimAll(%v, %d) read a refusal: %+v", r, keys, sr)
			}
			if sr.left != time.Duration(r[1].Int)*time.Millisecond || sr.queued != (r[2].Int == 1) {
				t.Fatalf("readClaimAll(%v, %d) = %+v", r, keys, sr)
			}
		}
	})
}

// FuzzHeed feeds a waiter any message of its lock's release channel: it
// hands the lock to the waiter (a lease without a call to the server)
// only when the message is handoff.lua's to this waiter, "OWNER TOKEN"
// with OWNER the waiter's random part and TOKEN one a script can grant,
// above the attempts of the waiter's latest refusal (41 here).
func FuzzHeed(f *testing.F) {
	const owner = "0123456789abcdef0123456789abcdef"
	for _, s := range []string{"", owner + " 42", owner + " 41", owner + " 5", owner + " 0", owner + " -1", owner + " 9007199254740992",
		owner + " 18446744073709551615", owner + " 42 x", "ffffffffffffffffffffffffffffffff 42", owner, " ", owner + " "} {
		f.Add(s, "job 7")
	}
	f.Fuzz(func(t *testing.T, msg, metadata string) {
		c := &claim{seen: 41}
		c.args[0] = owner
		if metadata != "" {
			c.args[0] += " " + metadata
		}
		c.heed(msg)
		if c.handed == 0 {
			return
		}
		token, ok := strings.CutPrefix(msg, owner+" ")
		n, err := strconv.ParseInt(token, 10, 64)
		if !ok || err != nil || n <= 41 || n > maxToken || int64(c.handed) != n {
			t.Fatalf("heed(%q) handed token %d", msg, c.handed)
		}
	})
}
