package claims

import (
	"math"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzReadClaim feeds readClaim replies of every shape a Node can hand
// it: only claim.lua's grant, {id, token, attempt}, hands out an item,
// and only a lone integer (ms left >= 0, -1 empty, -2 owner given up)
// hands out none; anything else is an error, never an item and never a
// panic.
func FuzzReadClaim(f *testing.F) {
	for _, r := range []node.Reply{
		{fuzzreply.Str("job-1"), fuzzreply.Int(1_700_000_000_000_000), fuzzreply.Int(1)},
		{fuzzreply.Str("x"), fuzzreply.Int(1<<53 - 1), fuzzreply.Int(3)},
		fuzzreply.Ints(1500), fuzzreply.Ints(0), fuzzreply.Ints(-1), fuzzreply.Ints(-2),
		{{}}, fuzzreply.Ints(-3), {}, {fuzzreply.Str("job"), fuzzreply.Int(0), fuzzreply.Int(1)},
		{fuzzreply.Str(""), fuzzreply.Int(5), fuzzreply.Int(1)}, {fuzzreply.Int(4), fuzzreply.Int(5), fuzzreply.Int(1)},
		{fuzzreply.Str("job"), fuzzreply.Int(5), fuzzreply.Int(0)}, fuzzreply.Ints(7, 8),
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
			if len(r) != 3 || r[0].Kind != node.Str || r[0].Str == "" || len(r[0].Str) > MaxID ||
				r[1].Kind != node.Int || r[1].Int < 1 || r[1].Int >= 1<<53 ||
				r[2].Kind != node.Int || r[2].Int < 1 || r[2].Int > math.MaxInt32 {
				t.Fatalf("readClaim(%v) granted %+v", r, cr)
			}
			if cr.id != r[0].Str || int64(cr.token) != r[1].Int || int64(cr.attempt) != r[2].Int {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		default:
			if len(r) != 1 || r[0].Kind != node.Int || r[0].Int < -2 || r[0].Int > math.MaxInt64/int64(time.Millisecond) {
				t.Fatalf("readClaim(%v) read no item: %+v", r, cr)
			}
			if cr.gone != (r[0].Int == -2) || r[0].Int >= 0 && cr.left != time.Duration(r[0].Int)*time.Millisecond {
				t.Fatalf("readClaim(%v) = %+v", r, cr)
			}
		}
	})
}
