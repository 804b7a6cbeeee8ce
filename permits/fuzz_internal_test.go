package permits

import (
	"math"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzReadClaim feeds readClaim replies of every shape a Node can hand
// it: only claim.lua's grant, {token, slot}, is a grant, and only its
// refusal, {left ms, place, 0}, is a refusal; anything else is an error,
// never a permit and never a panic.
func FuzzReadClaim(f *testing.F) {
	for _, r := range []node.Reply{
		fuzzreply.Ints(1, 0), fuzzreply.Ints(1<<53-1, 4), fuzzreply.Ints(1_700_000_000_000_000, 2),
		fuzzreply.Ints(1500, 0, 0), fuzzreply.Ints(0, 3, 0),
		fuzzreply.Ints(0, 0), fuzzreply.Ints(-3, 1), fuzzreply.Ints(1<<53, 0), fuzzreply.Ints(5, -1),
		{{}, {}}, {fuzzreply.Str("5"), fuzzreply.Int(0)}, fuzzreply.Ints(-1, 0, 0), fuzzreply.Ints(10, 0, 7),
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
				r[1].Kind != node.Int || r[1].Int < 0 || r[2].Kind != node.Int || r[2].Int != 0 {
				t.Fatalf("readClaim(%v) read a refusal: %+v", r, cr)
			}
			if cr.left != time.Duration(r[0].Int)*time.Millisecond || cr.queued != (r[1].Int > 0) {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		}
	})
}
