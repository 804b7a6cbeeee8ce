// Package valkeygo is the node.Node adapter for valkey-go clients.
package valkeygo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
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
	n := &valkeyNode{c: c}
	n.subs = subconn.New(n.dial)
	return n
}

type valkeyNode struct {
	c      valkey.Client
	subs   *subconn.Subs
	cached cached.Set // the scripts a Pipeline may send by SHA1
}

func (n *valkeyNode) String() string {
	for addr := range n.c.Nodes() {
		return addr
	}
	return "valkey"
}

func (n *valkeyNode) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if len(keys) > 1 && n.c.Mode() == valkey.ClientModeCluster && !sameSlot(n.c, []node.Call{{Keys: keys}}) {
		return nil, errCrossSlotKeys
	}
	return valkeyEval(ctx, n.c, s, keys, args)
}

// errCrossSlotKeys is what a cluster replies to a script whose keys are in
// different slots; valkey-go would panic building such a command, so the
// Node answers for the server.
var errCrossSlotKeys = &node.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot"}

type doer interface {
	B() valkey.Builder
	Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult
	DoMulti(ctx context.Context, cmds ...valkey.Completed) []valkey.ValkeyResult
}

func valkeyEval(ctx context.Context, c doer, s *node.Script, keys, args []string) (node.Reply, error) {
	r, err := valkeyResult(ctx, c.Do(ctx, evalsha(c, s, keys, args)))
	if isValkeyNoScript(err) {
		if s.First() != nil {
			return valkeyFirstRun(ctx, c, s, keys, args)
		}
		r, err = valkeyResult(ctx, c.Do(ctx, eval(c, s, keys, args)))
	}
	return r, err
}

// valkeyFirstRun runs s.First() in place of s, on one connection that then
// loads s (see NewScriptAfter): c's, when c is one already, else a
// connection dedicated to it for the while.
func valkeyFirstRun(ctx context.Context, c doer, s *node.Script, keys, args []string) (r node.Reply, err error) {
	run := func(dc doer) {
		r, err = valkeyResult(ctx, dc.Do(ctx, evalsha(dc, s.First(), keys, args)))
		if isValkeyNoScript(err) {
			r, err = valkeyResult(ctx, dc.Do(ctx, eval(dc, s.First(), keys, args)))
		}
		if err == nil {
			// A failed load costs only a later call running first again.
			_ = dc.Do(ctx, dc.B().ScriptLoad().Script(s.Source()).Build()).Error()
		}
	}
	vc, ok := c.(valkey.Client)
	if !ok {
		run(c)
		return r, err
	}
	if derr := vc.Dedicated(func(dc valkey.DedicatedClient) error {
		run(dc)
		return nil
	}); derr != nil {
		return nil, valkeyErr(ctx, derr)
	}
	return r, err
}

func evalsha(c doer, s *node.Script, keys, args []string) valkey.Completed {
	return c.B().Evalsha().Sha1(s.SHA()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func eval(c doer, s *node.Script, keys, args []string) valkey.Completed {
	return c.B().Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func (n *valkeyNode) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) (results []node.Result, acked int, err error) {
	if n.c.Mode() == valkey.ClientModeCluster {
		for _, c := range calls {
			if len(c.Keys) > 1 && !sameSlot(n.c, []node.Call{c}) {
				return nil, 0, errCrossSlotKeys
			}
		}
	}
	if wait.Replicas <= 0 {
		return valkeyPipeline(ctx, n.c, &n.cached, calls, wait)
	}
	if n.c.Mode() == valkey.ClientModeCluster && !sameSlot(n.c, calls) {
		return nil, 0, node.ErrCrossSlot
	}
	err = n.c.Dedicated(func(dc valkey.DedicatedClient) error {
		var err error
		results, acked, err = valkeyPipeline(ctx, dc, &n.cached, calls, wait)
		return err
	})
	return results, acked, err
}

// valkeyPipeline sends calls, and the WAIT when asked, as one DoMulti on
// c. A script not seen cached goes in full (see package cached), so the
// calls run in order; one the server no longer had is sent again by EVAL,
// or, for a script with a first, runs through first (see NewScriptAfter),
// before the WAIT is sent again.
func valkeyPipeline(ctx context.Context, c doer, seen *cached.Set, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	n := len(calls)
	if wait.Replicas > 0 {
		n++
	}
	cmds := make([]valkey.Completed, 0, n)
	for _, call := range calls {
		if call.Script.First() == nil && !seen.Has(call.Script) {
			cmds = append(cmds, eval(c, call.Script, call.Keys, call.Args))
			continue
		}
		cmds = append(cmds, evalsha(c, call.Script, call.Keys, call.Args))
	}
	if wait.Replicas > 0 {
		cmds = append(cmds, waitCmd(c, wait))
	}
	resps := c.DoMulti(ctx, cmds...)
	results := make([]node.Result, len(calls))
	slab := replySlab(resps[:len(calls)])
	var resend []int
	ranFirst := false
	for i := range calls {
		var (
			r   node.Reply
			err error
		)
		r, slab, err = valkeyResultIn(ctx, resps[i], slab)
		switch {
		case isValkeyNoScript(err) && calls[i].Script.First() != nil:
			call := calls[i]
			seen.Forget(call.Script)
			r, err := valkeyFirstRun(ctx, c, call.Script, call.Keys, call.Args)
			if err != nil && !isReplyError(err) {
				return nil, 0, err
			}
			results[i] = node.Result{Reply: r, Err: err}
			ranFirst = true
		case isValkeyNoScript(err):
			seen.Forget(calls[i].Script)
			resend = append(resend, i)
		case err != nil && !isReplyError(err):
			return nil, 0, err
		default:
			seen.Mark(calls[i].Script)
			results[i] = node.Result{Reply: r, Err: err}
		}
	}
	waitResp := resps[len(resps)-1]
	if len(resend) > 0 || ranFirst && wait.Replicas > 0 {
		// The NOSCRIPT calls did not run, so sending them again by EVAL
		// runs each exactly once; the WAIT goes again after them (and
		// after any first run), since it must count their writes too.
		cmds = cmds[:0]
		for _, i := range resend {
			call := calls[i]
			cmds = append(cmds, eval(c, call.Script, call.Keys, call.Args))
		}
		if wait.Replicas > 0 {
			cmds = append(cmds, waitCmd(c, wait))
		}
		resps = c.DoMulti(ctx, cmds...)
		for j, i := range resend {
			r, err := valkeyResult(ctx, resps[j])
			if err != nil && !isReplyError(err) {
				return nil, 0, err
			}
			seen.Mark(calls[i].Script)
			results[i] = node.Result{Reply: r, Err: err}
		}
		waitResp = resps[len(resps)-1]
	}
	if wait.Replicas <= 0 {
		return results, 0, nil
	}
	acked, err := waitResp.AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("node: WAIT: %w", valkeyErr(ctx, err))
	}
	return results, int(acked), nil
}

func sameSlot(c valkey.Client, calls []node.Call) bool {
	slot, seen := uint16(0), false
	for _, call := range calls {
		for _, k := range call.Keys {
			cmd := c.B().Get().Key(k).Build()
			s := cmd.Slot()
			if seen && s != slot {
				return false
			}
			slot, seen = s, true
		}
	}
	return true
}

func waitCmd(c doer, wait node.Wait) valkey.Completed {
	return c.B().Wait().Numreplicas(int64(wait.Replicas)).Timeout(wait.Timeout.Milliseconds()).Build()
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

// isValkeyNoScript and isReplyError see errors made by valkeyResult, never
// wrapped, so a type assertion does (and keeps the hot path free of the
// allocation errors.As would cost).
func isValkeyNoScript(err error) bool {
	re, ok := err.(*node.ReplyError)
	return ok && strings.HasPrefix(re.Msg, "NOSCRIPT")
}

func isReplyError(err error) bool {
	_, ok := err.(*node.ReplyError)
	return ok
}

// valkeyResult converts one reply: a server error becomes a *node.ReplyError, a
// nil reply an empty node.Reply, anything else a transport error kept
// recognisable by errors.Is for the context's end.
func valkeyResult(ctx context.Context, res valkey.ValkeyResult) (node.Reply, error) {
	r, _, err := valkeyResultIn(ctx, res, nil)
	return r, err
}

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
