// Package rueidis is the node.Node adapter for rueidis clients.
package rueidis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
	"github.com/dlockgo/dlock/node/internal/subconn"
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
func New(c rueidis.Client) node.Node {
	n := &rueidisNode{c: c}
	n.subs = subconn.New(n.dial)
	return n
}

type rueidisNode struct {
	c      rueidis.Client
	subs   *subconn.Subs
	cached cached.Set // the scripts a Pipeline may send by SHA1
}

func (n *rueidisNode) String() string {
	for addr := range n.c.Nodes() {
		return addr
	}
	return "rueidis"
}

func (n *rueidisNode) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if len(keys) > 1 && n.c.Mode() == rueidis.ClientModeCluster && !sameSlot(n.c, []node.Call{{Keys: keys}}) {
		return nil, errCrossSlotKeys
	}
	return evalOn(ctx, n.c, s, keys, args)
}

// errCrossSlotKeys is what a cluster replies to a script whose keys are in
// different slots; rueidis would panic building such a command, so the
// Node answers for the server.
var errCrossSlotKeys = &node.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot"}

type doer interface {
	B() rueidis.Builder
	Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult
	DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult
}

func evalOn(ctx context.Context, c doer, s *node.Script, keys, args []string) (node.Reply, error) {
	r, err := result(ctx, c.Do(ctx, evalsha(c, s, keys, args)))
	if isNoScript(err) {
		if s.First() != nil {
			return firstRun(ctx, c, s, keys, args)
		}
		r, err = result(ctx, c.Do(ctx, eval(c, s, keys, args)))
	}
	return r, err
}

// firstRun runs s.First() in place of s, on one connection that then
// loads s (see NewScriptAfter): c's, when c is one already, else a
// connection dedicated to it for the while.
func firstRun(ctx context.Context, c doer, s *node.Script, keys, args []string) (r node.Reply, err error) {
	run := func(dc doer) {
		r, err = result(ctx, dc.Do(ctx, evalsha(dc, s.First(), keys, args)))
		if isNoScript(err) {
			r, err = result(ctx, dc.Do(ctx, eval(dc, s.First(), keys, args)))
		}
		if err == nil {
			// A failed load costs only a later call running first again.
			_ = dc.Do(ctx, dc.B().ScriptLoad().Script(s.Source()).Build()).Error()
		}
	}
	vc, ok := c.(rueidis.Client)
	if !ok {
		run(c)
		return r, err
	}
	if derr := vc.Dedicated(func(dc rueidis.DedicatedClient) error {
		run(dc)
		return nil
	}); derr != nil {
		return nil, rueidisErr(ctx, derr)
	}
	return r, err
}

func evalsha(c doer, s *node.Script, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.SHA()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func eval(c doer, s *node.Script, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.Source()).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func (n *rueidisNode) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) (results []node.Result, acked int, err error) {
	if n.c.Mode() == rueidis.ClientModeCluster {
		for _, c := range calls {
			if len(c.Keys) > 1 && !sameSlot(n.c, []node.Call{c}) {
				return nil, 0, errCrossSlotKeys
			}
		}
	}
	if wait.Replicas <= 0 {
		return pipeline(ctx, n.c, &n.cached, calls, wait)
	}
	if n.c.Mode() == rueidis.ClientModeCluster && !sameSlot(n.c, calls) {
		return nil, 0, node.ErrCrossSlot
	}
	err = n.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		var err error
		results, acked, err = pipeline(ctx, dc, &n.cached, calls, wait)
		return err
	})
	return results, acked, err
}

// pipeline sends calls, and the WAIT when asked, as one DoMulti on
// c. A script not seen cached goes in full (see package cached), so the
// calls run in order; one the server no longer had is sent again by EVAL,
// or, for a script with a first, runs through first (see NewScriptAfter),
// before the WAIT is sent again.
func pipeline(ctx context.Context, c doer, seen *cached.Set, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	n := len(calls)
	if wait.Replicas > 0 {
		n++
	}
	cmds := make([]rueidis.Completed, 0, n)
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
		r, slab, err = resultIn(ctx, resps[i], slab)
		switch {
		case isNoScript(err) && calls[i].Script.First() != nil:
			call := calls[i]
			seen.Forget(call.Script)
			r, err := firstRun(ctx, c, call.Script, call.Keys, call.Args)
			if err != nil && !isReplyError(err) {
				return nil, 0, err
			}
			results[i] = node.Result{Reply: r, Err: err}
			ranFirst = true
		case isNoScript(err):
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
			r, err := result(ctx, resps[j])
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
		return nil, 0, fmt.Errorf("node: WAIT: %w", rueidisErr(ctx, err))
	}
	return results, int(acked), nil
}

func sameSlot(c rueidis.Client, calls []node.Call) bool {
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

func waitCmd(c doer, wait node.Wait) rueidis.Completed {
	return c.B().Wait().Numreplicas(int64(wait.Replicas)).Timeout(wait.Timeout.Milliseconds()).Build()
}

// Subscribe opens the Node's subscription connection on first use.
func (n *rueidisNode) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return n.subs.Subscribe(ctx, channel)
}

func (n *rueidisNode) Close() error {
	n.subs.Close()
	return nil
}

// dial dedicates a connection of n.c to subscriptions; rueidis answers a
// SUBSCRIBE on it only once the server confirmed it.
func (n *rueidisNode) dial(_ context.Context, notify func(channel, message string)) (subconn.Conn, <-chan error, error) {
	dc, _ := n.c.Dedicate()
	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) { notify(m.Channel, m.Message) },
	})
	return subConn{dc}, errs, nil
}

type subConn struct{ dc rueidis.DedicatedClient }

func (c subConn) Subscribe(ctx context.Context, channels ...string) error {
	return c.dc.Do(ctx, c.dc.B().Subscribe().Channel(channels...).Build()).Error()
}

func (c subConn) Unsubscribe(ctx context.Context, channel string) error {
	return c.dc.Do(ctx, c.dc.B().Unsubscribe().Channel(channel).Build()).Error()
}

func (c subConn) Close() { c.dc.Close() }

// isNoScript and isReplyError see errors made by result, never
// wrapped, so a type assertion does (and keeps the hot path free of the
// allocation errors.As would cost).
func isNoScript(err error) bool {
	re, ok := err.(*node.ReplyError)
	return ok && strings.HasPrefix(re.Msg, "NOSCRIPT")
}

func isReplyError(err error) bool {
	_, ok := err.(*node.ReplyError)
	return ok
}

// result converts one reply: a server error becomes a *node.ReplyError, a
// nil reply an empty node.Reply, anything else a transport error kept
// recognisable by errors.Is for the context's end.
func result(ctx context.Context, res rueidis.RedisResult) (node.Reply, error) {
	r, _, err := resultIn(ctx, res, nil)
	return r, err
}

// replySlab returns room for the replies of every one of resps, in one
// allocation rather than one per reply (see resultIn).
func replySlab(resps []rueidis.RedisResult) node.Reply {
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

// resultIn converts res, into the start of slab when it has room,
// and returns what is left of slab. The reply's capacity ends with it, so
// that an append to it cannot reach the next one's.
func resultIn(ctx context.Context, res rueidis.RedisResult, slab node.Reply) (node.Reply, node.Reply, error) {
	m, err := res.ToMessage()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return node.Reply{}, slab, nil
		}
		return nil, slab, rueidisErr(ctx, err)
	}
	elems := []rueidis.RedisMessage{m}
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
		v, err := value(&elems[i])
		if err != nil {
			return nil, slab, err
		}
		r = append(r, v)
	}
	return r, slab, nil
}

func rueidisErr(ctx context.Context, err error) error {
	if ve, ok := rueidis.IsRedisErr(err); ok && !ve.IsNil() {
		return &node.ReplyError{Msg: ve.Error()}
	}
	return ctxerr.Wrap(ctx, err)
}

func value(m *rueidis.RedisMessage) (node.Value, error) {
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
		if ve, ok := rueidis.IsRedisErr(err); ok {
			return node.Value{}, &node.ReplyError{Msg: ve.Error()}
		}
		return node.Value{}, err
	}
	return node.Value{}, errors.New("node: unexpected reply element (nested or map)")
}
