package ratelimit

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzParseReply feeds parseReply replies of every shape a Node can hand
// it: a reply of another shape than gcra.lua's is an error matching
// engine.ErrBadReply, never an admission, and never a panic; an
// admission carries the TAT it wrote, for the refund.
func FuzzParseReply(f *testing.F) {
	tat := fuzzreply.Str("1700000000123456.7")
	for _, s := range []struct {
		r     node.Reply
		burst uint8
	}{
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), tat}, 5},
		{fuzzreply.Ints(0, 0, 50000, 500000), 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000)}, 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), fuzzreply.Str("")}, 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Str("4"), fuzzreply.Int(0), fuzzreply.Int(100000), tat}, 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), fuzzreply.Int(1)}, 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), fuzzreply.Str("1700000000123456")}, 5},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), fuzzreply.Str("-1.2")}, 5},
		{fuzzreply.Ints(0, 0, 0, 500000), 5},
		{fuzzreply.Ints(2, 0, 1, 1), 5},
		{node.Reply{fuzzreply.Str("1"), fuzzreply.Int(4), fuzzreply.Int(0), fuzzreply.Int(100000), tat}, 5},
		{fuzzreply.Ints(1), 1},
		{nil, 1},
	} {
		f.Add(fuzzreply.Encode(s.r), s.burst)
	}
	f.Fuzz(func(t *testing.T, data []byte, burst uint8) {
		b := max(int(burst), 1)
		r := fuzzreply.Decode(data)
		a, err := parseReply(r, b)
		if err != nil {
			if !errors.Is(err, engine.ErrBadReply) || a.admitted {
				t.Fatalf("parseReply(%v) = %+v, %v; want no admission and ErrBadReply", r, a, err)
			}
			return
		}
		// A reply that parsed is gcra.lua's shape, exactly.
		want := 4
		if a.admitted {
			want = 5
			at, seq, ok := strings.Cut(a.written, ".")
			_, err1 := strconv.ParseUint(at, 10, 63)
			_, err2 := strconv.ParseUint(seq, 10, 63)
			if !ok || err1 != nil || err2 != nil || a.retryUs != 0 {
				t.Fatalf("parseReply(%v) = %+v: an admission without its id, or with a retry", r, a)
			}
		} else if a.retryUs <= 0 || a.written != "" {
			t.Fatalf("parseReply(%v) = %+v: a refusal with no retry, or a TAT", r, a)
		}
		for i := range 4 {
			if r[i].Kind != node.Int {
				t.Fatalf("parseReply(%v) = %+v: value %d is no integer", r, a, i)
			}
		}
		if len(r) != want || a.remaining < 0 || a.remaining > int64(b) || a.resetUs < 0 || a.resetUs > maxUs || a.retryUs > maxUs {
			t.Fatalf("parseReply(%v) = %+v; out of gcra.lua's shape", r, a)
		}
	})
}
