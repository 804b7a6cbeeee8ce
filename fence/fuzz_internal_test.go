package fence

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzPutReply feeds putResult replies of every shape a Node can hand
// it, and refusals with any message: only the integer 1 is a write; a
// DLSTALE refusal is a *StaleError carrying the highest token it names,
// or an error when it names none; anything else is an error, never a
// write, and never a panic.
func FuzzPutReply(f *testing.F) {
	for _, s := range []struct {
		r     node.Reply
		msg   string
		isErr bool
	}{
		{node.Reply{fuzzreply.Int(1)}, "", false},
		{node.Reply{fuzzreply.Int(0)}, "", false},
		{node.Reply{fuzzreply.Int(1), fuzzreply.Int(1)}, "", false},
		{node.Reply{fuzzreply.Str("1")}, "", false},
		{nil, "", false},
		{nil, "DLSTALE 9", true},
		{nil, "DLSTALE 9007199254740992", true},
		{nil, "DLSTALE x", true},
		{nil, "NOSCRIPT", true},
	} {
		f.Add(fuzzreply.Encode(s.r), s.msg, s.isErr)
	}
	f.Fuzz(func(t *testing.T, data []byte, msg string, isErr bool) {
		r := fuzzreply.Decode(data)
		var in error
		if isErr {
			in = &node.ReplyError{Msg: msg}
		}
		err := putResult("k", 5, r, in)
		if err == nil {
			if isErr || len(r) != 1 || r[0].Kind != node.Int || r[0].Int != 1 {
				t.Fatalf("putResult(%v, %v) = nil: a write from a reply that is not the integer 1", r, in)
			}
			return
		}
		var se *StaleError
		if errors.As(err, &se) {
			h, perr := strconv.ParseUint(strings.TrimPrefix(msg, "DLSTALE "), 10, 64)
			if !isErr || !strings.HasPrefix(msg, "DLSTALE ") || perr != nil || se.Highest != Token(h) || se.Token != 5 || se.Resource != "k" {
				t.Fatalf("putResult(%v, %v) = %#v; not the refusal it names", r, in, se)
			}
		}
	})
}
