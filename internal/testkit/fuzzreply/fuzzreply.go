// Package fuzzreply turns a fuzzer's bytes into a script reply, of the
// shapes a node.Node hands the strategies, so that the fuzz targets of
// every package that reads replies draw them alike.
//
// The adapters (node/goredis, node/valkeygo) flatten a server's reply into
// a node.Reply of nils, integers and strings, and turn anything else
// (a nested array, a map) into an error before a strategy sees it; so a
// node.Reply of any length and any mix of those three kinds is every
// reply a strategy can get.
package fuzzreply

import (
	"encoding/binary"

	"github.com/dlockgo/dlock/node"
)

// Decode reads a reply from data: values one after another, each a kind
// byte (taken mod 3: nil, integer, string) followed, for an integer, by 8
// bytes big-endian, and for a string by a length byte and that many bytes.
// A value cut short by the end of data takes what is left.
func Decode(data []byte) node.Reply {
	var r node.Reply
	for len(data) > 0 {
		kind := node.ValueKind(data[0] % 3)
		data = data[1:]
		switch kind {
		case node.Nil:
			r = append(r, node.Value{})
		case node.Int:
			var b [8]byte
			n := copy(b[:], data)
			data = data[n:]
			r = append(r, node.Value{Kind: node.Int, Int: int64(binary.BigEndian.Uint64(b[:]))})
		case node.Str:
			n := 0
			if len(data) > 0 {
				n, data = int(data[0]), data[1:]
			}
			n = min(n, len(data))
			r = append(r, node.Value{Kind: node.Str, Str: string(data[:n])})
			data = data[n:]
		}
	}
	return r
}

// Encode is the inverse of Decode, for seeds: Decode(Encode(r)) is r for
// every r whose strings are at most 255 bytes.
func Encode(r node.Reply) []byte {
	var out []byte
	for _, v := range r {
		out = append(out, byte(v.Kind))
		switch v.Kind {
		case node.Int:
			out = binary.BigEndian.AppendUint64(out, uint64(v.Int))
		case node.Str:
			s := v.Str[:min(len(v.Str), 255)]
			out = append(out, byte(len(s)))
			out = append(out, s...)
		}
	}
	return out
}

// Ints returns a reply of integers, for seeds.
func Ints(vs ...int64) node.Reply {
	r := make(node.Reply, len(vs))
	for i, v := range vs {
		r[i] = node.Value{Kind: node.Int, Int: v}
	}
	return r
}

// Str returns a string value, for seeds.
func Str(s string) node.Value { return node.Value{Kind: node.Str, Str: s} }

// Int returns an integer value, for seeds.
func Int(i int64) node.Value { return node.Value{Kind: node.Int, Int: i} }
