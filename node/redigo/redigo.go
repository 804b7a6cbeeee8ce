// Package redigo is the node.Node adapter for redigo
// (github.com/gomodule/redigo) connection pools.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
	"github.com/dlockgo/dlock/node/internal/subconn"
)

// New returns a Node that runs its commands on connections of p, a pool
// of connections to the one server addr names. addr is what String
// returns (so it tells servers apart in a quorum and names them in errors);
// it is not dialled: p's Dial or DialContext chooses where connections go,
// and authenticates them. p must not be nil.
//
// Eval and Pipeline each take one connection from p (Pool.GetContext,
// which waits for one when p.Wait is set) and give it back when done. A
// Pipeline sends its calls, and the WAIT when asked, on that connection
// in one round trip, so the WAIT counts exactly these writes; the resend
// after NOSCRIPT, and the first run of a script made by
// node.NewScriptAfter, use the same connection. A call whose context
// ends returns at once; redigo then closes its connection rather than
// give it back to p.
//
// Subscribe dials one connection of its own per Node (with p.DialContext,
// or p.Dial), outside p's count of active connections, on first use, and
// dials again (subscribing every active channel again) when it breaks;
// messages published while it is down are lost. It reads that connection
// without a read timeout, so a server that vanishes without closing the
// connection is noticed only by TCP keep-alive (redigo's default is
// five minutes); a wake-up missed meanwhile costs a waiter only its
// polling delay.
//
// redigo has no cluster client, and no Sentinel client of its own: a
// pool whose Dial asks Sentinel for the master serves, as one server, a
// replicated pair. Replies are read as RESP2, which has no booleans or
// doubles; the scripts in this module reply with neither.
func New(p *redis.Pool, addr string) node.Node {
	n := &redigoNode{p: p, addr: addr}
	n.subs = subconn.New(n.dial)
	return n
}

type redigoNode struct {
	p      *redis.Pool
	addr   string
	subs   *subconn.Subs
	cached cached.Set // the scripts a Pipeline may send by SHA1
}

func (n *redigoNode) String() string { return n.addr }

func (n *redigoNode) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	c, err := n.p.GetContext(ctx)
	if err != nil {
		return nil, redigoErr(ctx, err)
	}
	defer c.Close()
	v, err := redis.DoContext(c, ctx, "EVALSHA", evalArgs(s.SHA(), keys, args)...)
	if isNoScript(err) {
		if s.First() != nil {
			return firstRun(ctx, c, s, keys, args)
		}
		v, err = redis.DoContext(c, ctx, "EVAL", evalArgs(s.Source(), keys, args)...)
	}
	if err != nil {
		return nil, redigoErr(ctx, err)
	}
	return reply(v)
}

// firstRun runs s.First() in place of s on c and, when it replied without
// an error, loads s on c, so into the same server process (see
// node.NewScriptAfter).
func firstRun(ctx context.Context, c redis.Conn, s *node.Script, keys, args []string) (node.Reply, error) {
	f := s.First()
	v, err := redis.DoContext(c, ctx, "EVALSHA", evalArgs(f.SHA(), keys, args)...)
	if isNoScript(err) {
		v, err = redis.DoContext(c, ctx, "EVAL", evalArgs(f.Source(), keys, args)...)
	}
	if err != nil {
		return nil, redigoErr(ctx, err)
	}
	// A failed load costs only a later call running first again.
	_, _ = redis.DoContext(c, ctx, "SCRIPT", "LOAD", s.Source())
	return reply(v)
}

// evalArgs is the arguments of EVALSHA (body a SHA1) or EVAL (body a
// source).
func evalArgs(body string, keys, args []string) []any {
	a := make([]any, 0, 2+len(keys)+len(args))
	a = append(a, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	for _, v := range args {
		a = append(a, v)
	}
	return a
}

func (n *redigoNode) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	c, err := n.p.GetContext(ctx)
	if err != nil {
		return nil, 0, redigoErr(ctx, err)
	}
	defer c.Close()
	// A script not seen cached goes in full, so the calls run in order
	// (see package cached).
	replies, err := exchange(ctx, c, calls, func(s *node.Script) bool { return s.First() == nil && !n.cached.Has(s) }, wait)
	if err != nil {
		return nil, 0, err
	}
	results := make([]node.Result, len(calls))
	var resend []int
	ranFirst := false
	for i, call := range calls {
		v := replies[i]
		switch {
		case isNoScript(asErr(v)) && call.Script.First() != nil:
			n.cached.Forget(call.Script)
			r, err := firstRun(ctx, c, call.Script, call.Keys, call.Args)
			if err != nil && !isReplyError(err) {
				return nil, 0, err
			}
			results[i] = node.Result{Reply: r, Err: err}
			ranFirst = true
		case isNoScript(asErr(v)):
			n.cached.Forget(call.Script)
			resend = append(resend, i)
		default:
			n.cached.Mark(call.Script)
			results[i] = result(v)
		}
	}
	var waitReply any
	if wait.Replicas > 0 {
		waitReply = replies[len(replies)-1]
	}
	if len(resend) > 0 || ranFirst && wait.Replicas > 0 {
		// The NOSCRIPT calls did not run, so sending them again by EVAL
		// runs each exactly once; the WAIT goes again after them (and
		// after any first run), since it must count their writes too.
		again := make([]node.Call, len(resend))
		for j, i := range resend {
			again[j] = calls[i]
		}
		replies, err := exchange(ctx, c, again, func(*node.Script) bool { return true }, wait)
		if err != nil {
			return nil, 0, err
		}
		for j, i := range resend {
			n.cached.Mark(calls[i].Script)
			results[i] = result(replies[j])
		}
		if wait.Replicas > 0 {
			waitReply = replies[len(replies)-1]
		}
	}
	if wait.Replicas <= 0 {
		return results, 0, nil
	}
	acked, err := redis.Int(waitReply, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("node: WAIT: %w", redigoErr(ctx, err))
	}
	return results, acked, nil
}

// exchange sends calls on c, each by EVAL when inFull says so of its
// script and by EVALSHA else, then the WAIT when asked, and reads every
// reply, error replies among them as redis.Error values.
func exchange(ctx context.Context, c redis.Conn, calls []node.Call, inFull func(*node.Script) bool, wait node.Wait) ([]any, error) {
	if len(calls) == 0 && wait.Replicas <= 0 {
		return nil, nil
	}
	for _, call := range calls {
		cmd, body := "EVALSHA", call.Script.SHA()
		if inFull(call.Script) {
			cmd, body = "EVAL", call.Script.Source()
		}
		if err := c.Send(cmd, evalArgs(body, call.Keys, call.Args)...); err != nil {
			return nil, redigoErr(ctx, err)
		}
	}
	if wait.Replicas > 0 {
		if err := c.Send("WAIT", wait.Replicas, wait.Timeout.Milliseconds()); err != nil {
			return nil, redigoErr(ctx, err)
		}
	}
	v, err := redis.DoContext(c, ctx, "")
	if err != nil {
		return nil, redigoErr(ctx, err)
	}
	replies, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("node: pipeline replied %T; want one reply per command", v)
	}
	return replies, nil
}

func asErr(v any) error {
	if e, ok := v.(redis.Error); ok {
		return e
	}
	return nil
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT")
}

func isReplyError(err error) bool {
	var re *node.ReplyError
	return errors.As(err, &re)
}

// redigoErr converts an error of redigo: a server's error reply becomes a
// *node.ReplyError (redigo returns one from Dial too, for a refused AUTH),
// anything else is kept recognisable by errors.Is for the context's end.
func redigoErr(ctx context.Context, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return &node.ReplyError{Msg: string(re)}
	}
	// redigo sets a read deadline at ctx's, which may pass a moment before
	// ctx's own timer ends it.
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && !time.Now().Before(dl) && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return ctxerr.Wrap(ctx, err)
}

// result converts one reply of a pipeline.
func result(v any) node.Result {
	if e, ok := v.(redis.Error); ok {
		return node.Result{Err: &node.ReplyError{Msg: string(e)}}
	}
	r, err := reply(v)
	return node.Result{Reply: r, Err: err}
}

// reply converts a script's reply: nil becomes an empty node.Reply.
func reply(v any) (node.Reply, error) {
	if v == nil {
		return node.Reply{}, nil
	}
	elems, ok := v.([]any)
	if !ok {
		val, err := value(v)
		if err != nil {
			return nil, err
		}
		return node.Reply{val}, nil
	}
	r := make(node.Reply, len(elems))
	for i, e := range elems {
		val, err := value(e)
		if err != nil {
			return nil, err
		}
		r[i] = val
	}
	return r, nil
}

func value(v any) (node.Value, error) {
	switch v := v.(type) {
	case nil:
		return node.Value{}, nil
	case int64:
		return node.Value{Kind: node.Int, Int: v}, nil
	case []byte:
		return node.Value{Kind: node.Str, Str: string(v)}, nil
	case string:
		return node.Value{Kind: node.Str, Str: v}, nil
	case redis.Error:
		return node.Value{}, &node.ReplyError{Msg: string(v)}
	default:
		return node.Value{}, fmt.Errorf("node: unexpected reply element of type %T", v)
	}
}

// Subscribe dials the Node's subscription connection on first use.
func (n *redigoNode) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return n.subs.Subscribe(ctx, channel)
}

// Close ends the subscription connection; it does not close p.
func (n *redigoNode) Close() error {
	n.subs.Close()
	return nil
}

func (n *redigoNode) dial(ctx context.Context, notify func(channel, message string)) (subconn.Conn, <-chan error, error) {
	var (
		c   redis.Conn
		err error
	)
	switch {
	case n.p.DialContext != nil:
		c, err = n.p.DialContext(ctx)
	case n.p.Dial != nil:
		c, err = n.p.Dial()
	default:
		return nil, nil, errors.New("node: redigo pool has neither Dial nor DialContext")
	}
	if err != nil {
		return nil, nil, redigoErr(ctx, err)
	}
	sc := &subConn{psc: redis.PubSubConn{Conn: c}, pongs: make(chan string, 1),
		broken: make(chan error), done: make(chan struct{})}
	go sc.receive(notify)
	return sc, sc.broken, nil
}

// subConn is one subscription connection and the goroutine that reads it.
type subConn struct {
	psc     redis.PubSubConn
	pongs   chan string   // the payload of the latest PONG not taken yet
	broken  chan error    // closed by receive when the connection breaks
	done    chan struct{} // closed by receive when it ends
	closing atomic.Bool
	seq     atomic.Uint64
}

// Subscribe sends SUBSCRIBE and a PING carrying a token of its own: the
// server answers in order, so the PONG carrying the token proves the
// SUBSCRIBE took effect; a subscription confirmation could be a stale one
// from an earlier, abandoned attempt.
func (c *subConn) Subscribe(ctx context.Context, channels ...string) error {
	token := "dlock-sub-" + strconv.FormatUint(c.seq.Add(1), 10)
	args := make([]any, len(channels))
	for i, ch := range channels {
		args[i] = ch
	}
	if err := c.psc.Conn.Send("SUBSCRIBE", args...); err != nil {
		return err
	}
	if err := c.psc.Ping(token); err != nil {
		return err
	}
	for {
		select {
		case p := <-c.pongs:
			if p == token {
				return nil
			}
		case <-c.done:
			return errors.New("node: subscription connection broke")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *subConn) Unsubscribe(_ context.Context, channel string) error {
	return c.psc.Unsubscribe(channel)
}

func (c *subConn) Close() {
	c.closing.Store(true)
	_ = c.psc.Close()
	<-c.done
}

// receive reads the connection until it breaks or is closed.
func (c *subConn) receive(notify func(channel, message string)) {
	defer close(c.done)
	for {
		switch m := c.psc.ReceiveWithTimeout(0).(type) {
		case redis.Message:
			notify(m.Channel, string(m.Data))
		case redis.Pong:
			// Only the Subscribe holding the hub's lock waits, for the
			// last PING sent: a PONG pending, which one that gave up left
			// behind, makes way for this one.
			for {
				select {
				case c.pongs <- m.Data:
				default:
					select {
					case <-c.pongs:
					default:
					}
					continue
				}
				break
			}
		case error:
			if !c.closing.Load() {
				close(c.broken)
			}
			return
		}
	}
}
