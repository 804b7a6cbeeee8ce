package rwlock

import (
	"math"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzReadClaim feeds readClaim replies of every shape a Node can hand
// it: only claim.lua's grant, a lone token, is a grant, and only its
// refusal, {left ms, place}, is a refusal; anything else is an error,
// never a lease and never a panic.
func FuzzReadClaim(f *testing.F) {
	for _, r := range []node.Reply{
		fuzzreply.Ints(1), fuzzreply.Ints(1<<53 - 1), fuzzreply.Ints(1_700_000_000_000_000),
		fuzzreply.Ints(1500, 0), fuzzreply.Ints(0, 3),
		fuzzreply.Ints(0), fuzzreply.Ints(-3), fuzzreply.Ints(1 << 53), {{}}, {fuzzreply.Str("5")},
		fuzzreply.Ints(-1, 0), fuzzreply.Ints(10, -1), {}, fuzzreply.Ints(1, 2, 3),
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
			if len(r) != 1 || r[0].Kind != node.Int || r[0].Int < 1 || r[0].Int >= 1<<53 {
				t.Fatalf("readClaim(%v) granted token %d", r, cr.token)
			}
			if int64(cr.token) != r[0].Int {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		default:
			if len(r) != 2 || r[0].Kind != node.Int || r[0].Int < 0 || r[0].Int > math.MaxInt64/int64(time.Millisecond) ||
				r[1].Kind != node.Int || r[1].Int < 0 {
				t.Fatalf("readClaim(%v) read a refusal: %+v", r, cr)
			}
			if cr.left != time.Duration(r[0].Int)*time.Millisecond || cr.queued != (r[1].Int > 0) {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		}
	})
}
