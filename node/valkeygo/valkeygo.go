// Package valkeygo is the node.Node adapter for valkey-go clients.
package valkeygo

import (
	"context"
	"errors"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/rueapi"
	"github.com/dlockgo/dlock/node/internal/subconn"
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
func New(c valkey.Client) node.Node {
	n := &valkeyNode{c: c, Node: rueapi.New(lib(c))}
	n.subs = subconn.New(n.dial)
	return n
}

type conn = rueapi.Conn[valkey.Completed, valkey.ValkeyResult]

// lib is what package rueapi needs of c, in valkey-go's types.
func lib(c valkey.Client) rueapi.Lib[valkey.Completed, valkey.ValkeyResult] {
	return rueapi.Lib[valkey.Completed, valkey.ValkeyResult]{
		Client: c,
		Dedicated: func(fn func(conn) error) error {
			return c.Dedicated(func(dc valkey.DedicatedClient) error { return fn(dc) })
		},
		Cluster: c.Mode() == valkey.ClientModeCluster,
		Slot: func(key string) uint16 {
			cmd := c.B().Get().Key(key).Build()
			return cmd.Slot()
		},
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
		Result: valkeyResultIn,
		Slab:   replySlab,
		Int: func(ctx context.Context, res valkey.ValkeyResult) (int64, error) {
			i, err := res.AsInt64()
			return i, valkeyErr(ctx, err)
		},
		Err: valkeyErr,
	}
}

type valkeyNode struct {
	*rueapi.Node[valkey.Completed, valkey.ValkeyResult] // Eval, Pipeline
	c                                                   valkey.Client
	subs                                                *subconn.Subs
}

func (n *valkeyNode) String() string {
	for addr := range n.c.Nodes() {
		return addr
	}
	return "valkey"
}

// Subscribe opens the Node's subscription connection on first use.
func (n *valkeyNode) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return n.subs.Subscribe(ctx, channel)
}

func (n *valkeyNode) Close() error {
	n.subs.Close()
	return nil
}

// dial dedicates a connection of n.c to subscriptions; valkey-go answers a
// SUBSCRIBE on it only once the server confirmed it.
func (n *valkeyNode) dial(_ context.Context, notify func(channel, message string)) (subconn.Conn, <-chan error, error) {
	dc, _ := n.c.Dedicate()
	errs := dc.SetPubSubHooks(valkey.PubSubHooks{
		OnMessage: func(m valkey.PubSubMessage) { notify(m.Channel, m.Message) },
	})
	return subConn{dc}, errs, nil
}

type subConn struct{ dc valkey.DedicatedClient }

func (c subConn) Subscribe(ctx context.Context, channels ...string) error {
	return c.dc.Do(ctx, c.dc.B().Subscribe().Channel(channels...).Build()).Error()
}

func (c subConn) Unsubscribe(ctx context.Context, channel string) error {
	return c.dc.Do(ctx, c.dc.B().Unsubscribe().Channel(channel).Build()).Error()
}

func (c subConn) Close() { c.dc.Close() }

// replySlab returns room for the replies of every one of resps, in one
// allocation rather than one per reply (see valkeyResultIn).
func replySlab(resps []valkey.ValkeyResult) node.Reply {
	n := 0
	for _, res := range resps {
		if m, err := res.ToMessage(); err == nil {
			if elems, err := m.ToArray(); err == nil {
				n += len(elems)
			} else {
				n++
			}
		}
	}
	return make(node.Reply, n)
}

// valkeyResultIn converts res, into the start of slab when it has room,
// and returns what is left of slab. The reply's capacity ends with it, so
// that an append to it cannot reach the next one's.
func valkeyResultIn(ctx context.Context, res valkey.ValkeyResult, slab node.Reply) (node.Reply, node.Reply, error) {
	m, err := res.ToMessage()
	if err != nil {
		if valkey.IsValkeyNil(err) {
			return node.Reply{}, slab, nil
		}
		return nil, slab, valkeyErr(ctx, err)
	}
	elems := []valkey.ValkeyMessage{m}
	if m.IsArray() {
		elems, _ = m.ToArray()
	}
	var r node.Reply
	if len(slab) >= len(elems) {
		r, slab = slab[:0:len(elems)], slab[len(elems):]
	} else {
		r = make(node.Reply, 0, len(elems))
	}
	for i := range elems {
		v, err := valkeyValue(&elems[i])
		if err != nil {
			return nil, slab, err
		}
		r = append(r, v)
	}
	return r, slab, nil
}

func valkeyErr(ctx context.Context, err error) error {
	if ve, ok := valkey.IsValkeyErr(err); ok && !ve.IsNil() {
		return &node.ReplyError{Msg: ve.Error()}
	}
	return ctxerr.Wrap(ctx, err)
}

func valkeyValue(m *valkey.ValkeyMessage) (node.Value, error) {
	switch {
	case m.IsNil():
		return node.Value{}, nil
	case m.IsInt64():
		i, _ := m.AsInt64()
		return node.Value{Kind: node.Int, Int: i}, nil
	case m.IsString():
		s, _ := m.ToString()
		return node.Value{Kind: node.Str, Str: s}, nil
	case m.IsBool():
		if b, _ := m.AsBool(); b {
			return node.Value{Kind: node.Int, Int: 1}, nil
		}
		return node.Value{Kind: node.Int}, nil
	case m.IsFloat64():
		f, _ := m.AsFloat64()
		return node.Value{Kind: node.Str, Str: strconv.FormatFloat(f, 'g', -1, 64)}, nil
	}
	if err := m.Error(); err != nil {
		if ve, ok := valkey.IsValkeyErr(err); ok {
			return node.Value{}, &node.ReplyError{Msg: ve.Error()}
		}
		return node.Value{}, err
	}
	return node.Value{}, errors.New("node: unexpected reply element (nested or map)")
}
