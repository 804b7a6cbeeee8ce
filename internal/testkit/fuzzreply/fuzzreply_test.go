package fuzzreply_test

import (
	"reflect"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/fuzzreply"
	"github.com/dlockgo/dlock/node"
)

// FuzzDecode checks that Encode undoes Decode, so seeds written with
// Encode are the replies they say.
func FuzzDecode(f *testing.F) {
	f.Add(fuzzreply.Encode(node.Reply{fuzzreply.Int(-1), fuzzreply.Str("x"), {}}))
	f.Add([]byte{2, 200, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fuzzreply.Decode(data)
		if got := fuzzreply.Decode(fuzzreply.Encode(r)); !reflect.DeepEqual(got, r) {
			t.Fatalf("Decode(Encode(%v)) = %v", r, got)
		}
	})
}
