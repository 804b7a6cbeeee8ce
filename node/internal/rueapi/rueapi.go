// Package rueapi is the node.Node of the adapters of rueidis and of
// valkey-go, its fork: their clients have the same methods on types of
// their own, so each adapter hands this package, as a Lib, the functions
// that name its types, and this package does the rest.
package rueapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
	"github.com/dlockgo/dlock/node/internal/subconn"
)

// Conn is a client, or a connection dedicated to one caller, that runs
// commands of type Cmd and answers with results of type Res.
type Conn[Cmd, Res any] interface {
	Do(ctx context.Context, cmd Cmd) Res
	// DoMulti sends cmds on one connection, in one round trip, and
	// returns their results in order.
	DoMulti(ctx context.Context, cmds ...Cmd) []Res
}

// Lib is what a Node needs of a client library and of one client of it:
// Cmd is its command type, Res its result type and M its reply message
// type. Every field must be set.
type Lib[Cmd, Res, M any] struct {
	Client Conn[Cmd, Res]
	// Dedicated runs fn on a connection of Client dedicated to it for
	// the while.
	Dedicated func(fn func(Conn[Cmd, Res]) error) error
	// Dedicate returns a connection of Client dedicated to subscriptions,
	// which hands each message to notify, a channel that receives or is
	// closed when it breaks, and the function that closes it.
	Dedicate func(notify func(channel, message string)) (c Conn[Cmd, Res], broken <-chan error, close func())
	// Addrs names the servers Client knows; Name stands in when it knows
	// none.
	Addrs func() iter.Seq[string]
	Name  string
	// Cluster is set for a cluster client; Slot is a key's hash slot.
	Cluster bool
	Slot    func(key string) uint16

	// Evalsha and Eval build a script's call, by SHA1 and in full.
	Evalsha, Eval func(s *node.Script, keys, args []string) Cmd
	ScriptLoad    func(src string) Cmd
	Wait          func(w node.Wait) Cmd
	Subscribe     func(channels ...string) Cmd
	Unsubscribe   func(channel string) Cmd

	// Message is a result's reply, or its error; IsNil tells the error of
	// a nil reply, and IsServerErr that of an error reply.
	Message     func(Res) (M, error)
	IsNil       func(error) bool
	IsServerErr func(error) bool
	// The reply's content, by the message methods of the same names. Each
	// takes a message by value: a pointer to one in a variable would move
	// it to the heap.
	IsNilMsg, IsArray, IsInt64, IsString, IsBool, IsFloat64 func(M) bool
	ToArray                                                 func(M) []M
	AsInt64                                                 func(M) int64
	ToString                                                func(M) string
	AsBool                                                  func(M) bool
	AsFloat64                                               func(M) float64
	Error                                                   func(M) error
}

// Node is the node.Node of a Lib.
type Node[Cmd, Res, M any] struct {
	lib    Lib[Cmd, Res, M]
	cached cached.Set // the scripts a Pipeline may send by SHA1
	subs   *subconn.Subs
}

// New returns the Node of lib.
func New[Cmd, Res, M any](lib Lib[Cmd, Res, M]) *Node[Cmd, Res, M] {
	n := &Node[Cmd, Res, M]{lib: lib}
	n.subs = subconn.New(n.dial)
	return n
}

// String names the first server the client knows.
func (n *Node[Cmd, Res, M]) String() string {
	for addr := range n.lib.Addrs() {
		return addr
	}
	return n.lib.Name
}

// errCrossSlotKeys is what a cluster replies to a script whose keys are in
// different slots; the clients would panic building such a command, so the
// Node answers for the server.
var errCrossSlotKeys = &node.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot"}

// Eval is node.Node's Eval: one Do on the client, so concurrent callers
// share its auto-pipelined connection.
func (n *Node[Cmd, Res, M]) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if len(keys) > 1 && n.lib.Cluster && !n.sameSlot([]node.Call{{Keys: keys}}) {
		return nil, errCrossSlotKeys
	}
	l := &n.lib
	r, _, err := n.result(ctx, l.Client.Do(ctx, l.Evalsha(s, keys, args)), nil)
	if IsNoScript(err) {
		if s.First() != nil {
			return n.firstRun(ctx, l.Client, false, s, keys, args)
		}
		r, _, err = n.result(ctx, l.Client.Do(ctx, l.Eval(s, keys, args)), nil)
	}
	return r, err
}

// firstRun runs s.First() in place of s, on one connection that then
// loads s (see node.NewScriptAfter): c, when dedicated says it is one
// already, else a connection dedicated to it for the while.
func (n *Node[Cmd, Res, M]) firstRun(ctx context.Context, c Conn[Cmd, Res], dedicated bool, s *node.Script, keys, args []string) (r node.Reply, err error) {
	l := &n.lib
	run := func(dc Conn[Cmd, Res]) {
		r, _, err = n.result(ctx, dc.Do(ctx, l.Evalsha(s.First(), keys, args)), nil)
		if IsNoScript(err) {
			r, _, err = n.result(ctx, dc.Do(ctx, l.Eval(s.First(), keys, args)), nil)
		}
		if err == nil {
			// A failed load costs only a later call running first again.
			_, _, _ = n.result(ctx, dc.Do(ctx, l.ScriptLoad(s.Source())), nil)
		}
	}
	if dedicated {
		run(c)
		return r, err
	}
	if derr := l.Dedicated(func(dc Conn[Cmd, Res]) error {
		run(dc)
		return nil
	}); derr != nil {
		return nil, n.err(ctx, derr)
	}
	return r, err
}

// Pipeline is node.Node's Pipeline: one DoMulti, which the clients write
// on one connection in one round trip. With a WAIT, the whole exchange
// (including a resend after NOSCRIPT) runs in Dedicated, so the WAIT
// counts exactly these writes; on a cluster client its calls must then all
// be in one slot, or it fails with node.ErrCrossSlot.
func (n *Node[Cmd, Res, M]) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) (results []node.Result, acked int, err error) {
	if n.lib.Cluster {
		for _, c := range calls {
			if len(c.Keys) > 1 && !n.sameSlot([]node.Call{c}) {
				return nil, 0, errCrossSlotKeys
			}
		}
	}
	if wait.Replicas <= 0 {
		return n.pipeline(ctx, n.lib.Client, false, calls, wait)
	}
	if n.lib.Cluster && !n.sameSlot(calls) {
		return nil, 0, node.ErrCrossSlot
	}
	err = n.lib.Dedicated(func(dc Conn[Cmd, Res]) error {
		var err error
		results, acked, err = n.pipeline(ctx, dc, true, calls, wait)
		return err
	})
	return results, acked, err
}

// pipeline sends calls, and the WAIT when asked, as one DoMulti on c. A
// script not seen cached goes in full (see package cached), so the calls
// run in order; one the server no longer had is sent again by EVAL, or,
// for a script with a first, runs through first (see NewScriptAfter),
// before the WAIT is sent again.
func (n *Node[Cmd, Res, M]) pipeline(ctx context.Context, c Conn[Cmd, Res], dedicated bool, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	l, seen := &n.lib, &n.cached
	size := len(calls)
	if wait.Replicas > 0 {
		size++
	}
	cmds := make([]Cmd, 0, size)
	for _, call := range calls {
		if call.Script.First() == nil && !seen.Has(call.Script) {
			cmds = append(cmds, l.Eval(call.Script, call.Keys, call.Args))
			continue
		}
		cmds = append(cmds, l.Evalsha(call.Script, call.Keys, call.Args))
	}
	if wait.Replicas > 0 {
		cmds = append(cmds, l.Wait(wait))
	}
	resps := c.DoMulti(ctx, cmds...)
	results := make([]node.Result, len(calls))
	slab := n.slab(resps[:len(calls)])
	var resend []int
	ranFirst := false
	for i := range calls {
		var (
			r   node.Reply
			err error
		)
		r, slab, err = n.result(ctx, resps[i], slab)
		switch {
		case IsNoScript(err) && calls[i].Script.First() != nil:
			call := calls[i]
			seen.Forget(call.Script)
			r, err := n.firstRun(ctx, c, dedicated, call.Script, call.Keys, call.Args)
			if err != nil && !isReplyError(err) {
				return nil, 0, err
			}
			results[i] = node.Result{Reply: r, Err: err}
			ranFirst = true
		case IsNoScript(err):
			seen.Forget(calls[i].Script)
			resend = append(resend, i)
		case err != nil && !isReplyError(err):
			return nil, 0, err
		default:
			seen.Mark(calls[i].Script)
			results[i] = node.Result{Reply: r, Err: err}
		}
	}
	var waitResp Res
	if wait.Replicas > 0 {
		waitResp = resps[len(resps)-1]
	}
	if len(resend) > 0 || ranFirst && wait.Replicas > 0 {
		// The NOSCRIPT calls did not run, so sending them again by EVAL
		// runs each exactly once; the WAIT goes again after them (and
		// after any first run), since it must count their writes too.
		cmds = cmds[:0]
		for _, i := range resend {
			call := calls[i]
			cmds = append(cmds, l.Eval(call.Script, call.Keys, call.Args))
		}
		if wait.Replicas > 0 {
			cmds = append(cmds, l.Wait(wait))
		}
		resps = c.DoMulti(ctx, cmds...)
		for j, i := range resend {
			r, _, err := n.result(ctx, resps[j], nil)
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
	m, err := l.Message(waitResp)
	if err != nil {
		return nil, 0, fmt.Errorf("node: WAIT: %w", n.err(ctx, err))
	}
	if !l.IsInt64(m) {
		return nil, 0, errors.New("node: WAIT replied with no integer")
	}
	return results, int(l.AsInt64(m)), nil
}

func (n *Node[Cmd, Res, M]) sameSlot(calls []node.Call) bool {
	slot, seen := uint16(0), false
	for _, call := range calls {
		for _, k := range call.Keys {
			s := n.lib.Slot(k)
			if seen && s != slot {
				return false
			}
			slot, seen = s, true
		}
	}
	return true
}

// IsNoScript reports whether err, as Lib.Result returns it, is the
// server's NOSCRIPT. Result's errors are never wrapped, so a type
// assertion does (and keeps the hot path free of the allocation
// errors.As would cost).
func IsNoScript(err error) bool {
	re, ok := err.(*node.ReplyError)
	return ok && strings.HasPrefix(re.Msg, "NOSCRIPT")
}

func isReplyError(err error) bool {
	_, ok := err.(*node.ReplyError)
	return ok
}

// slab returns room for the replies of every one of resps, in one
// allocation rather than one per reply (see result).
func (n *Node[Cmd, Res, M]) slab(resps []Res) node.Reply {
	size := 0
	for _, res := range resps {
		if m, err := n.lib.Message(res); err == nil {
			if n.lib.IsArray(m) {
				size += len(n.lib.ToArray(m))
			} else {
				size++
			}
		}
	}
	return make(node.Reply, size)
}

// result converts one reply, into the start of slab when it has room, and
// returns what is left of slab. The reply's capacity ends with it, so that
// an append to it cannot reach the next one's. A server's error reply
// becomes a *node.ReplyError (never wrapped), a nil reply an empty
// node.Reply, any other error one that errors.Is matches with ctx's end
// once ctx has ended.
func (n *Node[Cmd, Res, M]) result(ctx context.Context, res Res, slab node.Reply) (node.Reply, node.Reply, error) {
	l := &n.lib
	m, err := l.Message(res)
	if err != nil {
		if l.IsNil(err) {
			return node.Reply{}, slab, nil
		}
		return nil, slab, n.err(ctx, err)
	}
	var elems []M
	size, isArray := 1, l.IsArray(m)
	if isArray {
		elems = l.ToArray(m)
		size = len(elems)
	}
	var r node.Reply
	if len(slab) >= size {
		r, slab = slab[:0:size], slab[size:]
	} else {
		r = make(node.Reply, 0, size)
	}
	if !isArray {
		v, err := n.value(m)
		if err != nil {
			return nil, slab, err
		}
		return append(r, v), slab, nil
	}
	for _, e := range elems {
		v, err := n.value(e)
		if err != nil {
			return nil, slab, err
		}
		r = append(r, v)
	}
	return r, slab, nil
}

func (n *Node[Cmd, Res, M]) value(m M) (node.Value, error) {
	l := &n.lib
	switch {
	case l.IsNilMsg(m):
		return node.Value{}, nil
	case l.IsInt64(m):
		return node.Value{Kind: node.Int, Int: l.AsInt64(m)}, nil
	case l.IsString(m):
		return node.Value{Kind: node.Str, Str: l.ToString(m)}, nil
	case l.IsBool(m):
		if l.AsBool(m) {
			return node.Value{Kind: node.Int, Int: 1}, nil
		}
		return node.Value{Kind: node.Int}, nil
	case l.IsFloat64(m):
		return node.Value{Kind: node.Str, Str: strconv.FormatFloat(l.AsFloat64(m), 'g', -1, 64)}, nil
	}
	if err := l.Error(m); err != nil {
		if l.IsServerErr(err) {
			return node.Value{}, &node.ReplyError{Msg: err.Error()}
		}
		return node.Value{}, err
	}
	return node.Value{}, errors.New("node: unexpected reply element (nested or map)")
}

// err converts an error of the client: a server's error reply becomes a
// *node.ReplyError, anything else is kept recognisable by errors.Is for
// ctx's end.
func (n *Node[Cmd, Res, M]) err(ctx context.Context, err error) error {
	if err != nil && n.lib.IsServerErr(err) {
		return &node.ReplyError{Msg: err.Error()}
	}
	return ctxerr.Wrap(ctx, err)
}

// Subscribe is node.Node's Subscribe: one dedicated connection per Node,
// opened on first use and reopened (with every active channel subscribed
// again) when it breaks. The clients answer a SUBSCRIBE only once the
// server confirmed it.
func (n *Node[Cmd, Res, M]) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return n.subs.Subscribe(ctx, channel)
}

// Close ends the subscription connection; it does not close the client.
func (n *Node[Cmd, Res, M]) Close() error {
	n.subs.Close()
	return nil
}

func (n *Node[Cmd, Res, M]) dial(_ context.Context, notify func(channel, message string)) (subconn.Conn, <-chan error, error) {
	c, broken, close := n.lib.Dedicate(notify)
	return &subConn[Cmd, Res, M]{n: n, c: c, close: close}, broken, nil
}

type subConn[Cmd, Res, M any] struct {
	n     *Node[Cmd, Res, M]
	c     Conn[Cmd, Res]
	close func()
}

func (s *subConn[Cmd, Res, M]) Subscribe(ctx context.Context, channels ...string) error {
	_, err := s.n.lib.Message(s.c.Do(ctx, s.n.lib.Subscribe(channels...)))
	return s.n.err(ctx, err)
}

func (s *subConn[Cmd, Res, M]) Unsubscribe(ctx context.Context, channel string) error {
	_, err := s.n.lib.Message(s.c.Do(ctx, s.n.lib.Unsubscribe(channel)))
	return s.n.err(ctx, err)
}

func (s *subConn[Cmd, Res, M]) Close() { s.close() }
