// Package rueidis is the node.Node adapter for rueidis clients
// (github.com/redis/rueidis), which rueidislock uses. A program that
// imports both names one of them, for example:
//
//	import rueidisnode "github.com/dlockgo/dlock/node/rueidis"
//
// valkey-go is a fork of rueidis, and the two adapters share all but the
// names of their types (node/internal/rueapi).
package rueidis

import (
	"iter"
	"maps"

	"github.com/redis/rueidis"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/rueapi"
)

// New returns a Node that runs its commands through c. Eval is plain
// c.Do, so concurrent callers share rueidis's auto-pipelined connection.
//
// Pipeline is one DoMulti, which rueidis writes on one connection in one
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
// master, and follows it through a failover (node/rueidis's TestSentinel).
//
// The Node uses no client-side caching: c may be made with DisableCache,
// which rueidis needs for a server without RESP3 (before Redis 6).
func New(c rueidis.Client) node.Node { return rueapi.New(lib(c)) }

type (
	conn = rueapi.Conn[rueidis.Completed, rueidis.RedisResult]
	msg  = rueidis.RedisMessage
)

// lib names rueidis's types for package rueapi, which does the rest.
// node/valkeygo is generated from this file, with valkey-go's names (see
// its TestTwin).
func lib(c rueidis.Client) rueapi.Lib[rueidis.Completed, rueidis.RedisResult, msg] {
	return rueapi.Lib[rueidis.Completed, rueidis.RedisResult, msg]{
		Client: c,
		Dedicated: func(fn func(conn) error) error {
			return c.Dedicated(func(dc rueidis.DedicatedClient) error { return fn(dc) })
		},
		Dedicate: func(notify func(channel, message string)) (conn, <-chan error, func()) {
			dc, _ := c.Dedicate()
			hooks := rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { notify(m.Channel, m.Message) }}
			return dc, dc.SetPubSubHooks(hooks), dc.Close
		},
		Addrs:   func() iter.Seq[string] { return maps.Keys(c.Nodes()) },
		Name:    "rueidis",
		Cluster: c.Mode() == rueidis.ClientModeCluster,
		Slot:    func(key string) uint16 { cmd := c.B().Get().Key(key).Build(); return cmd.Slot() },

		Evalsha: func(s *node.Script, keys, args []string) rueidis.Completed {
			return c.B().Evalsha().Sha1(s.SHA()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		},
		Eval: func(s *node.Script, keys, args []string) rueidis.Completed {
			return c.B().Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		},
		ScriptLoad: func(src string) rueidis.Completed { return c.B().ScriptLoad().Script(src).Build() },
		Wait: func(w node.Wait) rueidis.Completed {
			return c.B().Wait().Numreplicas(int64(w.Replicas)).Timeout(w.Timeout.Milliseconds()).Build()
		},
		Subscribe:   func(chans ...string) rueidis.Completed { return c.B().Subscribe().Channel(chans...).Build() },
		Unsubscribe: func(ch string) rueidis.Completed { return c.B().Unsubscribe().Channel(ch).Build() },

		Message:     rueidis.RedisResult.ToMessage,
		IsNil:       rueidis.IsRedisNil,
		IsServerErr: func(err error) bool { ve, ok := rueidis.IsRedisErr(err); return ok && !ve.IsNil() },
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
