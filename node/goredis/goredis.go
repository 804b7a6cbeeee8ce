// Package goredis is the node.Node adapter for go-redis v9 clients.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/cached"
	"github.com/dlockgo/dlock/node/internal/hub"
)

// New returns a Node that runs its commands through c.
//
// Pipeline keeps its calls on one connection for a *redis.Client (standalone
// or failover); with a WAIT it holds one connection (Client.Conn) for the
// whole exchange, including a resend after NOSCRIPT. A *redis.ClusterClient
// splits a pipeline by slot; with a WAIT, every key must be served by one
// master (else node.ErrCrossSlot), whose connection is then held the same way,
// and a MOVED reply comes back as that call's *node.ReplyError rather than being
// followed.
//
// Subscribe uses one go-redis PubSub connection per Node, which reconnects
// and resubscribes by itself; messages published while it is down are lost.
//
// node.Script bodies, keys and args are passed to go-redis as *string (see
// evalArgs), so a hook that prints commands (Cmd.String, tracing) shows
// them as pointers; they are read until Eval or Pipeline returns.
//
// Eval sends concurrent calls to one server together (see batch.go): a
// call that finds one of the server's few lanes free (up to four, no
// more than the client's PoolSize) goes out at once, alone, as a plain
// command under its caller's context, as go-redis sends any command;
// calls that come while every lane is busy wait for the first to free,
// and go out together as one go-redis Pipeline, so that the client's
// ProcessPipelineHook hooks, TLS, authentication and failover apply to
// them as to any pipeline. A caller of Eval whose context ends while its
// call waits for a lane or for its batch's reply returns at once, with
// the context's error; its call may still run, as when any reply is
// lost, unless it was still waiting for a lane. A batch whose connection
// breaks fails the calls in it, or, on a client with MaxRetries, is sent
// again whole, as a lone call would be. The batch runs under the values of one of its callers' contexts,
// not their cancellation: its deadline, if each of them has one, is the
// latest of theirs. This applies to a *redis.Client (standalone or
// failover) and, per master, to a *redis.ClusterClient for calls with
// keys; other clients, and calls that hold a connection (Pipeline with a
// WAIT, the first run of a script made by node.NewScriptAfter), send each
// call by itself. WithoutBatching turns it off.
//
// go-redis honours a context's deadline only when the client was made with
// ContextTimeoutEnabled; without it a call to a hung server runs until the
// client's ReadTimeout. The strategies bound their own waits either way,
// but set it so the calls they abandon end sooner.
func New(c redis.UniversalClient, opts ...Option) node.Node {
	n := &goRedis{c: c, hub: hub.New(), batched: true}
	for _, o := range opts {
		if o != nil {
			o(n)
		}
	}
	if n.batched {
		if rc, ok := c.(*redis.Client); ok {
			n.one = newBatcher(c, lanesFor(rc.Options().PoolSize))
		}
	}
	return n
}

// Option configures a Node made by New.
type Option func(*goRedis)

// WithoutBatching makes Eval send each call by itself, on a connection of
// its own, however many calls are in flight. It costs throughput under
// concurrency; it keeps each call in its caller's own trace, and a client
// made with ContextTimeoutEnabled ends each call at its own caller's
// deadline.
func WithoutBatching() Option { return func(n *goRedis) { n.batched = false } }

type goRedis struct {
	c      redis.UniversalClient
	hub    *hub.Hub
	cached cached.Set // the scripts a Pipeline may send by SHA1

	batched bool
	one     *batcher // a *redis.Client's, when batched

	// masters holds a *redis.ClusterClient's batcher per master address,
	// when batched: one per address ever seen, made on first use.
	masters   sync.Map
	mastersMu sync.Mutex // held to add to masters, and by Close
	closed    bool       // set by Close, under mastersMu

	// ps and done are set by the first Subscribe, under hub.sem.
	mu    sync.Mutex
	ps    *redis.PubSub
	done  chan struct{}
	pongs chan string
	seq   uint64
}

func (n *goRedis) String() string {
	switch c := n.c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		return strings.Join(addrs, ",")
	default:
		return "go-redis"
	}
}

func (n *goRedis) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	argv, reply := evalBuffers(3 + len(keys) + len(args))
	b := n.batcherFor(ctx, keys)
	v, err := n.do(ctx, b, evalArgs(argv, "evalsha", s, keys, args)).Result()
	if isNoScript(err) {
		if s.First() != nil {
			return n.firstRun(ctx, s, keys, args)
		}
		v, err = n.do(ctx, b, evalArgs(argv, "eval", s, keys, args)).Result()
	}
	return goRedisEvalReply(ctx, v, err, reply)
}

// do runs argv through b, or by itself when b is nil.
func (n *goRedis) do(ctx context.Context, b *batcher, argv []any) *redis.Cmd {
	if b == nil {
		return n.c.Do(ctx, argv...)
	}
	return b.do(ctx, argv)
}

// batcherFor returns the batcher of the server a call on keys goes to, or
// nil when the call goes by itself.
func (n *goRedis) batcherFor(ctx context.Context, keys []string) *batcher {
	if n.one != nil || !n.batched {
		return n.one
	}
	cc, ok := n.c.(*redis.ClusterClient)
	if !ok || len(keys) == 0 {
		return nil
	}
	m, err := cc.MasterForKey(ctx, keys[0])
	if err != nil {
		// The call by itself meets the same error, or a cluster
		// that has recovered meanwhile.
		return nil
	}
	addr := m.Options().Addr
	if b, ok := n.masters.Load(addr); ok {
		return b.(*batcher)
	}
	n.mastersMu.Lock()
	defer n.mastersMu.Unlock()
	if n.closed {
		return nil
	}
	b, _ := n.masters.LoadOrStore(addr, newBatcher(n.c, lanesFor(cc.Options().PoolSize)))
	return b.(*batcher)
}

// evalMem is the memory one Eval needs of its own: the command's
// arguments and room for a short reply, in one allocation rather than
// two. The reply keeps it alive, arguments included, which is a few
// hundred bytes. A call with more arguments than it holds allocates as
// before, so as never to cost more.
type evalMem struct {
	argv  [8]any // EVALSHA, the script, the key count, then keys and args
	reply [2]node.Value
}

// largeEvalMem is evalMem for calls of up to 14 keys and args, such as
// the quorum's acquisition with tokens (9 keys, 5 args, 7 values in its
// reply), so that they too need one allocation rather than two.
type largeEvalMem struct {
	argv  [17]any
	reply [7]node.Value
}

// evalBuffers returns the argv and reply buffers of an Eval of n command
// arguments, both empty and in one allocation, or nil ones when n is
// too many for that.
func evalBuffers(n int) ([]any, node.Reply) {
	switch {
	case n <= len(evalMem{}.argv):
		m := new(evalMem)
		return m.argv[:0], m.reply[:0]
	case n <= len(largeEvalMem{}.argv):
		m := new(largeEvalMem)
		return m.argv[:0], m.reply[:0]
	}
	return nil, nil
}

// goRedisEvalReply converts an Eval's reply, into dst when it has room.
func goRedisEvalReply(ctx context.Context, v any, err error, dst node.Reply) (node.Reply, error) {
	if errors.Is(err, redis.Nil) {
		return node.Reply{}, nil
	}
	if err != nil {
		return nil, goRedisErr(ctx, err)
	}
	return goRedisReply(v, dst)
}

// goRedisDoer runs one command: a client, or one of its connections.
type goRedisDoer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// firstRun runs s.first in place of s, on one connection that then loads s
// (see NewScriptAfter). A client that cannot lend one connection runs
// s.first and loads nothing.
func (n *goRedis) firstRun(ctx context.Context, s *node.Script, keys, args []string) (node.Reply, error) {
	var c *redis.Client
	switch cc := n.c.(type) {
	case *redis.Client:
		c = cc
	case *redis.ClusterClient:
		if len(keys) > 0 {
			m, err := cc.MasterForKey(ctx, keys[0])
			if err != nil {
				return nil, goRedisErr(ctx, err)
			}
			c = m
		}
	}
	if c == nil {
		return goRedisFirstRun(ctx, n.c, s, keys, args, false)
	}
	conn := c.Conn()
	defer conn.Close()
	return goRedisFirstRun(ctx, conn, s, keys, args, true)
}

// goRedisFirstRun runs s.first on c and, when load is set and it replied
// without an error, loads s on c.
func goRedisFirstRun(ctx context.Context, c goRedisDoer, s *node.Script, keys, args []string, load bool) (node.Reply, error) {
	f := s.First()
	v, err := c.Do(ctx, evalArgs(nil, "evalsha", f, keys, args)...).Result()
	if isNoScript(err) {
		v, err = c.Do(ctx, evalArgs(nil, "eval", f, keys, args)...).Result()
	}
	if load && (err == nil || errors.Is(err, redis.Nil)) {
		// A failed load costs only a later call running first again.
		_, src := s.Pointers()
		_ = c.Do(ctx, "script", "load", src).Err()
	}
	return goRedisEvalReply(ctx, v, err, nil)
}

func (n *goRedis) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	if wait.Replicas > 0 {
		c, ok := n.c.(*redis.Client)
		if cc, isCluster := n.c.(*redis.ClusterClient); isCluster {
			var err error
			if c, err = clusterMaster(ctx, cc, calls); err != nil {
				return nil, 0, err
			}
			ok = c != nil
		}
		if ok {
			conn := c.Conn()
			defer conn.Close()
			return goRedisPipeline(ctx, conn, &n.cached, calls, wait, func(call node.Call) (node.Reply, error) {
				return goRedisFirstRun(ctx, conn, call.Script, call.Keys, call.Args, true)
			})
		}
	}
	return goRedisPipeline(ctx, n.c, &n.cached, calls, wait, func(call node.Call) (node.Reply, error) {
		return n.firstRun(ctx, call.Script, call.Keys, call.Args)
	})
}

// clusterMaster returns the one master serving every key of calls, or nil
// when calls have no keys.
func clusterMaster(ctx context.Context, cc *redis.ClusterClient, calls []node.Call) (*redis.Client, error) {
	var master *redis.Client
	for _, call := range calls {
		for _, k := range call.Keys {
			m, err := cc.MasterForKey(ctx, k)
			if err != nil {
				return nil, ctxerr.Wrap(ctx, err)
			}
			if master != nil && m != master {
				return nil, node.ErrCrossSlot
			}
			master = m
		}
	}
	return master, nil
}

type pipeliner interface{ Pipeline() redis.Pipeliner }

// goRedisPipeline sends calls, and the WAIT when asked, as one pipeline of
// src. A script not seen cached goes in full (see package cached), so the
// calls run in order; one the server no longer had is sent again by EVAL,
// or, for a script with a first, runs through first (see NewScriptAfter),
// before the WAIT is sent again.
func goRedisPipeline(ctx context.Context, src pipeliner, seen *cached.Set, calls []node.Call, wait node.Wait, first func(node.Call) (node.Reply, error)) ([]node.Result, int, error) {
	results := make([]node.Result, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	// The calls' arguments share one allocation, each its own part of it.
	n := 0
	for _, c := range calls {
		n += 3 + len(c.Keys) + len(c.Args)
	}
	argv := make([]any, 0, n)
	p := src.Pipeline()
	for i, c := range calls {
		cmd := "evalsha"
		if c.Script.First() == nil && !seen.Has(c.Script) {
			cmd = "eval"
		}
		a := evalArgs(argv[len(argv):len(argv):cap(argv)], cmd, c.Script, c.Keys, c.Args)
		argv = argv[:len(argv)+len(a)]
		cmds[i] = p.Do(ctx, a[:len(a):len(a)]...)
	}
	var waitCmd *redis.Cmd
	if wait.Replicas > 0 {
		waitCmd = waitOn(ctx, p, wait)
	}
	_, _ = p.Exec(ctx)

	slab := replySlab(cmds)
	var resend []int
	ranFirst := false
	for i, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case isNoScript(err) && calls[i].Script.First() != nil:
			seen.Forget(calls[i].Script)
			r, err := first(calls[i])
			var re *node.ReplyError
			if err != nil && !errors.As(err, &re) {
				return nil, 0, err
			}
			results[i] = node.Result{Reply: r, Err: err}
			ranFirst = true
		case isNoScript(err):
			seen.Forget(calls[i].Script)
			resend = append(resend, i)
		case err != nil && !isReplyErr(err):
			return nil, 0, goRedisErr(ctx, err)
		default:
			seen.Mark(calls[i].Script)
			results[i], slab = goRedisResultIn(ctx, v, err, slab)
		}
	}
	if len(resend) > 0 || ranFirst && waitCmd != nil {
		// The NOSCRIPT calls did not run, so sending them again by EVAL
		// runs each exactly once; the WAIT goes again after them (and
		// after any first run), since it must count their writes too.
		p = src.Pipeline()
		cmds = cmds[:0]
		for _, i := range resend {
			c := calls[i]
			cmds = append(cmds, p.Do(ctx, evalArgs(nil, "eval", c.Script, c.Keys, c.Args)...))
		}
		if wait.Replicas > 0 {
			waitCmd = waitOn(ctx, p, wait)
		}
		_, _ = p.Exec(ctx)
		for j, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil && !isReplyErr(err) {
				return nil, 0, goRedisErr(ctx, err)
			}
			seen.Mark(calls[resend[j]].Script)
			results[resend[j]] = goRedisResult(ctx, v, err)
		}
	}
	if waitCmd == nil {
		return results, 0, nil
	}
	acked, err := waitCmd.Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("node: WAIT: %w", goRedisErr(ctx, err))
	}
	return results, int(acked), nil
}

// waitOn queues WAIT on p. Its reply is read within the client's
// ReadTimeout, so wait.Timeout must stay below it.
func waitOn(ctx context.Context, p redis.Pipeliner, wait node.Wait) *redis.Cmd {
	return p.Do(ctx, "wait", wait.Replicas, wait.Timeout.Milliseconds())
}

func goRedisResult(ctx context.Context, v any, err error) node.Result {
	r, _ := goRedisResultIn(ctx, v, err, nil)
	return r
}

// replySlab returns room for the replies of every one of cmds, in one
// allocation rather than one per reply (see goRedisResultIn).
func replySlab(cmds []*redis.Cmd) node.Reply {
	n := 0
	for _, cmd := range cmds {
		if elems, ok := cmd.Val().([]any); ok {
			n += len(elems)
		} else {
			n++
		}
	}
	return make(node.Reply, n)
}

// goRedisResultIn converts a call's result, its reply into the start of
// slab when it has room, and returns what is left of slab. The reply's
// capacity ends with it, so that an append to it cannot reach the next
// one's.
func goRedisResultIn(ctx context.Context, v any, err error, slab node.Reply) (node.Result, node.Reply) {
	if errors.Is(err, redis.Nil) {
		return node.Result{Reply: node.Reply{}}, slab
	}
	if err != nil {
		return node.Result{Err: goRedisErr(ctx, err)}, slab
	}
	n := 1
	if elems, ok := v.([]any); ok {
		n = len(elems)
	}
	dst := slab[:0:0]
	if len(slab) >= n {
		dst, slab = slab[:0:n], slab[n:]
	}
	r, err := goRedisReply(v, dst)
	return node.Result{Reply: r, Err: err}, slab
}

// Subscribe creates the Node's PubSub on first use and starts the goroutine
// that reads it.
func (n *goRedis) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return n.hub.Subscribe(ctx, channel, n.subscribe, n.unsubscribe)
}

func (n *goRedis) subscribe(ctx context.Context, channel string) error {
	n.mu.Lock()
	// Checked under n.mu, which Close takes after marking the hub closed:
	// either Close sees the PubSub made here and ends its reader, or this
	// sees the hub closed and makes none.
	if n.hub.IsClosed() {
		n.mu.Unlock()
		return node.ErrClosed
	}
	if n.done == nil {
		n.ps = n.c.Subscribe(context.Background())
		n.done = make(chan struct{})
		n.pongs = make(chan string, 1)
		go n.receive(n.ps, n.done, n.pongs)
	}
	ps, pongs := n.ps, n.pongs
	n.seq++
	token := "dlock-sub-" + strconv.FormatUint(n.seq, 10)
	n.mu.Unlock()
	// The server answers in order, so the PONG carrying this token proves
	// the SUBSCRIBE before it took effect; a subscribe confirmation could
	// be a stale one from an earlier, abandoned attempt.
	if err := ps.Subscribe(ctx, channel); err != nil {
		return err
	}
	if err := ps.Ping(ctx, token); err != nil {
		return err
	}
	for {
		select {
		case p, ok := <-pongs:
			if !ok {
				return node.ErrClosed
			}
			if p == token {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (n *goRedis) unsubscribe(ctx context.Context, channel string) error {
	n.mu.Lock()
	ps := n.ps
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	return ps.Unsubscribe(ctx, channel)
}

// receive is the Node's one subscription goroutine; it ends when Close
// closes ps.
func (n *goRedis) receive(ps *redis.PubSub, done chan struct{}, pongs chan string) {
	defer close(done)
	defer close(pongs)
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if n.hub.IsClosed() {
				return
			}
			// The next Receive reconnects and resubscribes; the pause keeps
			// a server that is down from turning this into a busy loop.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			n.hub.Notify(m.Channel, m.Payload)
		case *redis.Pong:
			// Only the Subscribe holding hub.sem waits here, for the last
			// PING sent: a PONG pending, which one that gave up left
			// behind, makes way for this one rather than block the reader
			// or push out the PONG awaited.
			for {
				select {
				case pongs <- m.Payload:
				default:
					select {
					case <-pongs:
					default:
					}
					continue
				}
				break
			}
		}
	}
}

// Close ends the subscription, and waits for the batches of Eval in flight
// to end (within the client's timeouts); Eval then sends each call by
// itself.
func (n *goRedis) Close() error {
	if !n.hub.Close() {
		return nil
	}
	defer n.hub.Wait()
	defer n.closeBatchers()
	n.mu.Lock()
	ps, done := n.ps, n.done
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// closeBatchers closes every batcher of n and waits until none is in use.
func (n *goRedis) closeBatchers() {
	n.mastersMu.Lock()
	n.closed = true
	bs := []*batcher{}
	if n.one != nil {
		bs = append(bs, n.one)
	}
	n.masters.Range(func(_, b any) bool {
		bs = append(bs, b.(*batcher))
		return true
	})
	n.mastersMu.Unlock()
	for _, b := range bs {
		<-b.close()
	}
}

// evalArgs builds EVALSHA (with s's SHA1) or EVAL (with its source) as
// one argument list, which go-redis's own EvalSha would build again from a
// second one. The script text, keys and args go in as *string, which
// go-redis writes (and reads for cluster routing) as the string: a pointer
// fits in an interface without the allocation a boxed string costs. The
// strings must stay as they are until the command has run; the caller's
// slices are not written to meanwhile. The list is appended to argv, which
// is allocated when it has no room.
func evalArgs(argv []any, cmd string, s *node.Script, keys, args []string) []any {
	// The name goes in as a constant: a string variable would be boxed
	// into an allocation of its own.
	var name any = "evalsha"
	body, src := s.Pointers()
	if cmd == "eval" {
		name, body = "eval", src
	}
	if n := 3 + len(keys) + len(args); cap(argv) < n {
		argv = make([]any, 0, n)
	}
	argv = append(argv, name, body, len(keys))
	for i := range keys {
		argv = append(argv, &keys[i])
	}
	for i := range args {
		argv = append(argv, &args[i])
	}
	return argv
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

func isReplyErr(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &re)
}

func goRedisErr(ctx context.Context, err error) error {
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.Nil) {
		return &node.ReplyError{Msg: re.Error()}
	}
	return ctxerr.Wrap(ctx, err)
}

// goRedisReply converts v, appending to dst (empty), which is allocated
// when it has no room.
func goRedisReply(v any, dst node.Reply) (node.Reply, error) {
	elems, isArray := v.([]any)
	if !isArray {
		val, err := goRedisValue(v)
		if err != nil {
			return nil, err
		}
		if cap(dst) < 1 {
			return node.Reply{val}, nil
		}
		return append(dst, val), nil
	}
	if cap(dst) < len(elems) {
		dst = make(node.Reply, 0, len(elems))
	}
	for _, e := range elems {
		val, err := goRedisValue(e)
		if err != nil {
			return nil, err
		}
		dst = append(dst, val)
	}
	return dst, nil
}

func goRedisValue(v any) (node.Value, error) {
	switch v := v.(type) {
	case nil:
		return node.Value{}, nil
	case int64:
		return node.Value{Kind: node.Int, Int: v}, nil
	case string:
		return node.Value{Kind: node.Str, Str: v}, nil
	case bool:
		if v {
			return node.Value{Kind: node.Int, Int: 1}, nil
		}
		return node.Value{Kind: node.Int}, nil
	case float64:
		return node.Value{Kind: node.Str, Str: strconv.FormatFloat(v, 'g', -1, 64)}, nil
	default:
		return node.Value{}, fmt.Errorf("node: unexpected reply element of type %T", v)
	}
}
