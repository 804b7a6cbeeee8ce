// Package rueapi is the Eval and Pipeline of the node adapters of rueidis
// and of valkey-go, its fork: their clients have the same methods on
// types of their own, so each adapter hands this package, as a Lib, the
// few functions that name its types, and keeps only those and its
// subscription connection.
//
// The reply conversion stays in each adapter: written here over the
// libraries' message types, it would move every reply to the heap.
package rueapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
)

// Conn is a client, or a connection dedicated to one caller, that runs
// commands of type Cmd and answers with results of type Res.
type Conn[Cmd, Res any] interface {
	Do(ctx context.Context, cmd Cmd) Res
	// DoMulti sends cmds on one connection, in one round trip, and
	// returns their results in order.
	DoMulti(ctx context.Context, cmds ...Cmd) []Res
}

// Lib is what a Node needs of a client library and of one client of it.
type Lib[Cmd, Res any] struct {
	Client Conn[Cmd, Res]
	// Dedicated runs fn on a connection of Client dedicated to it for
	// the while.
	Dedicated func(fn func(Conn[Cmd, Res]) error) error
	// Cluster is set for a cluster client; Slot is a key's hash slot.
	Cluster bool
	Slot    func(key string) uint16

	// Evalsha and Eval build a script's call, by SHA1 and in full.
	Evalsha, Eval func(s *node.Script, keys, args []string) Cmd
	ScriptLoad    func(src string) Cmd
	Wait          func(w node.Wait) Cmd

	// Result converts one reply, into the start of slab when it has room,
	// and returns what is left of slab. The reply's capacity ends with
	// it. A server's error reply becomes a *node.ReplyError (unwrapped),
	// a nil reply an empty node.Reply, any other error one that
	// errors.Is matches with ctx's end once ctx has ended.
	Result func(ctx context.Context, res Res, slab node.Reply) (node.Reply, node.Reply, error)
	// Slab returns room for the replies of every one of resps, in one
	// allocation.
	Slab func(resps []Res) node.Reply
	// Int converts an integer reply (WAIT's), and Err an error of the
	// client, as Result does.
	Int func(ctx context.Context, res Res) (int64, error)
	Err func(ctx context.Context, err error) error
}

// Node runs a node.Node's Eval and Pipeline through its Lib.
type Node[Cmd, Res any] struct {
	lib    Lib[Cmd, Res]
	cached cached.Set // the scripts a Pipeline may send by SHA1
}

// New returns the Node of lib, whose fields must all be set.
func New[Cmd, Res any](lib Lib[Cmd, Res]) *Node[Cmd, Res] { return &Node[Cmd, Res]{lib: lib} }

// errCrossSlotKeys is what a cluster replies to a script whose keys are in
// different slots; the clients would panic building such a command, so the
// Node answers for the server.
var errCrossSlotKeys = &node.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot"}

// Eval is node.Node's Eval: one Do on the client, so concurrent callers
// share its auto-pipelined connection.
func (n *Node[Cmd, Res]) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	if len(keys) > 1 && n.lib.Cluster && !n.sameSlot([]node.Call{{Keys: keys}}) {
		return nil, errCrossSlotKeys
	}
	l := &n.lib
	r, _, err := l.Result(ctx, l.Client.Do(ctx, l.Evalsha(s, keys, args)), nil)
	if IsNoScript(err) {
		if s.First() != nil {
			return n.firstRun(ctx, l.Client, false, s, keys, args)
		}
		r, _, err = l.Result(ctx, l.Client.Do(ctx, l.Eval(s, keys, args)), nil)
	}
	return r, err
}

// firstRun runs s.First() in place of s, on one connection that then
// loads s (see node.NewScriptAfter): c, when dedicated says it is one
// already, else a connection dedicated to it for the while.
func (n *Node[Cmd, Res]) firstRun(ctx context.Context, c Conn[Cmd, Res], dedicated bool, s *node.Script, keys, args []string) (r node.Reply, err error) {
	l := &n.lib
	run := func(dc Conn[Cmd, Res]) {
		r, _, err = l.Result(ctx, dc.Do(ctx, l.Evalsha(s.First(), keys, args)), nil)
		if IsNoScript(err) {
			r, _, err = l.Result(ctx, dc.Do(ctx, l.Eval(s.First(), keys, args)), nil)
		}
		if err == nil {
			// A failed load costs only a later call running first again.
			_, _, _ = l.Result(ctx, dc.Do(ctx, l.ScriptLoad(s.Source())), nil)
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
		return nil, l.Err(ctx, derr)
	}
	return r, err
}

// Pipeline is node.Node's Pipeline: one DoMulti, which the clients write
// on one connection in one round trip. With a WAIT, the whole exchange
// (including a resend after NOSCRIPT) runs in Dedicated, so the WAIT
// counts exactly these writes; on a cluster client its calls must then all
// be in one slot, or it fails with node.ErrCrossSlot.
func (n *Node[Cmd, Res]) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) (results []node.Result, acked int, err error) {
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
func (n *Node[Cmd, Res]) pipeline(ctx context.Context, c Conn[Cmd, Res], dedicated bool, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
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
	slab := l.Slab(resps[:len(calls)])
	var resend []int
	ranFirst := false
	for i := range calls {
		var (
			r   node.Reply
			err error
		)
		r, slab, err = l.Result(ctx, resps[i], slab)
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
			r, _, err := l.Result(ctx, resps[j], nil)
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
	acked, err := l.Int(ctx, waitResp)
	if err != nil {
		return nil, 0, fmt.Errorf("node: WAIT: %w", err)
	}
	return results, int(acked), nil
}

func (n *Node[Cmd, Res]) sameSlot(calls []node.Call) bool {
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
