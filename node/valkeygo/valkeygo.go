// Code generated from node/rueidis/rueidis.go by TestTwin; DO NOT EDIT.

// Package valkeygo is the node.Node adapter for valkey-go clients
// (github.com/valkey-io/valkey-go), a fork of rueidis: it is
// node/rueidis with valkey-go's names, and shares the rest with it
// (node/internal/rueapi).
package valkeygo

import (
	"iter"
	"maps"

	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/rueapi"
)

// New returns a Node that runs its commands through c. Eval is plain
// c.Do, so concurrent callers share valkey-go's auto-pipelined connection.
//
// Pipeline is one DoMulti, which valkey-go writes on one connection in one
// round trip. With a WAIT, the whole exchange (including a resend after
// NOSCRIPT) runs in c.Dedicated, so the WAIT counts exactly these writes.
//
// Subscribe uses one dedicated connection per Node, opened on first use and
// reopened (with every active channel resubscribed) when it breaks; messages
// published while it is down are lost. On a cluster client the connection
// goes to any one master, which hears every PUBLISH of the cluster.
//
// A cluster client splits a Pipeline by slot; with a WAIT, its calls must
// all be in one slot (one hash tag), or Pipeline fails with node.ErrCrossSlot.
// A Sentinel client (ClientOption.Sentinel) is a client of the current
// master, and follows it through a failover (the root package's TestOpenSentinel).
//
// The Node uses no client-side caching: c may be made with DisableCache,
// which valkey-go needs for a server without RESP3 (before Redis 6).
func New(c valkey.Client) node.Node { return rueapi.New(lib(c)) }

type (
	conn = rueapi.Conn[valkey.Completed, valkey.ValkeyResult]
	msg  = valkey.ValkeyMessage
)

// lib names valkey-go's types for package rueapi, which does the rest.
// This file is generated from node/rueidis/rueidis.go (see TestTwin).
func lib(c valkey.Client) rueapi.Lib[valkey.Completed, valkey.ValkeyResult, msg] {
	return rueapi.Lib[valkey.Completed, valkey.ValkeyResult, msg]{
		Client: c,
		Dedicated: func(fn func(conn) error) error {
			return c.Dedicated(func(dc valkey.DedicatedClient) error { return fn(dc) })
		},
		Dedicate: func(notify func(channel, message string)) (conn, <-chan error, func()) {
			dc, _ := c.Dedicate()
			hooks := valkey.PubSubHooks{OnMessage: func(m valkey.PubSubMessage) { notify(m.Channel, m.Message) }}
			return dc, dc.SetPubSubHooks(hooks), dc.Close
		},
		Addrs:   func() iter.Seq[string] { return maps.Keys(c.Nodes()) },
		Name:    "valkey",
		Cluster: c.Mode() == valkey.ClientModeCluster,
		Slot:    func(key string) uint16 { cmd := c.B().Get().Key(key).Build(); return cmd.Slot() },

		Evalsha: func(s *node.Script, keys, args []string) valkey.Completed {
			return c.B().Evalsha().Sha1(s.SHA()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		},
		Eval: func(s *node.Script, keys, args []string) valkey.Completed {
			return c.B().Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		},
		ScriptLoad: func(src string) valkey.Completed { return c.B().ScriptLoad().Script(src).Build() },
		Wait: func(w node.Wait) valkey.Completed {
			return c.B().Wait().Numreplicas(int64(w.Replicas)).Timeout(w.Timeout.Milliseconds()).Build()
		},
		Subscribe:   func(chans ...string) valkey.Completed { return c.B().Subscribe().Channel(chans...).Build() },
		Unsubscribe: func(ch string) valkey.Completed { return c.B().Unsubscribe().Channel(ch).Build() },

		Message:     valkey.ValkeyResult.ToMessage,
		IsNil:       valkey.IsValkeyNil,
		IsServerErr: func(err error) bool { ve, ok := valkey.IsValkeyErr(err); return ok && !ve.IsNil() },
		IsNilMsg:    func(m msg) bool { return m.IsNil() },
		IsArray:     func(m msg) bool { return m.IsArray() },
		IsInt64:     func(m msg) bool { return m.IsInt64() },
		IsString:    func(m msg) bool { return m.IsString() },
		IsBool:      func(m msg) bool { return m.IsBool() },
		IsFloat64:   func(m msg) bool { return m.IsFloat64() },
		ToArray:     func(m msg) []msg { a, _ := m.ToArray(); return a },
		AsInt64:     func(m msg) int64 { i, _ := m.AsInt64(); return i },
		ToString:    func(m msg) string { s, _ := m.ToString(); return s },
		AsBool:      func(m msg) bool { b, _ := m.AsBool(); return b },
		AsFloat64:   func(m msg) float64 { f, _ := m.AsFloat64(); return f },
		Error:       func(m msg) error { return m.Error() },
	}
}
