package goredis_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
)

// echo counts its calls on KEYS[1] and answers ARGV[1], so a test sees
// both that each caller got its own reply and that each call ran once.
var echo = node.NewScript(`redis.call('INCR', KEYS[1]); return ARGV[1]`)

// traceKey is a context value a hook looks for, as a tracer would.
type traceKey struct{}

// recorder is a go-redis hook that records the EVAL and EVALSHA commands
// its client sends, by themselves or in pipelines.
type recorder struct {
	mu        sync.Mutex
	alone     int             // commands sent by themselves
	pipelines [][]redis.Cmder // each pipeline's commands, once it returned
	entered   int             // pipelines that began
	untraced  int             // pipelines whose ctx lacked traceKey
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "eval" || n == "evalsha" {
			r.mu.Lock()
			r.alone++
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.mu.Lock()
		r.entered++
		if ctx.Value(traceKey{}) == nil {
			r.untraced++
		}
		r.mu.Unlock()
		err := next(ctx, cmds)
		r.mu.Lock()
		r.pipelines = append(r.pipelines, cmds)
		r.mu.Unlock()
		return err
	}
}

// counts returns how many commands went by themselves, how many
// pipelines returned, and how many commands those carried.
func (r *recorder) counts() (alone, pipelines, batched int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pipelines {
		batched += len(p)
	}
	return r.alone, len(r.pipelines), batched
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alone, r.pipelines, r.entered, r.untraced = 0, nil, 0, 0
}

func (r *recorder) began() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entered
}

// newNode returns a Node on a client for srv made with opts (its Addr
// set here), the client recording what it sends in the returned
// recorder. Both are closed when the test ends.
func newNode(t *testing.T, srv *redistest.Server, opts redis.Options) (node.Node, *recorder) {
	t.Helper()
	opts.Addr = srv.Addr()
	opts.DisableIdentity = true
	c := redis.NewClient(&opts)
	rec := &recorder{}
	c.AddHook(rec)
	n := goredis.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		_ = c.Close()
	})
	return n, rec
}

type outcome struct {
	reply node.Reply
	err   error
	took  time.Duration
}

// evalAsync runs echo on key with arg in a goroutine of its own.
func evalAsync(ctx context.Context, n node.Node, key, arg string) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		start := time.Now()
		r, err := n.Eval(ctx, echo, []string{key}, arg)
		out <- outcome{r, err, time.Since(start)}
	}()
	return out
}

// waitLoad waits until n has busy lanes in use and queued calls waiting.
func waitLoad(t *testing.T, n node.Node, busy, queued int) {
	t.Helper()
	waitUntil(t, func() bool {
		b, q := goredis.Load(n)
		return b == busy && q == queued
	}, "lanes in use and calls queued: "+strconv.Itoa(busy)+", "+strconv.Itoa(queued))
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blocked returns how many clients srv holds blocked (by CLIENT PAUSE).
func blocked(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	v, err := srv.Info("blocked_clients")
	require.NoError(t, err)
	b, err := strconv.Atoi(v)
	require.NoError(t, err)
	return b
}

// TestBatchEachCallerItsOwnReply: calls that queue behind busy lanes go out
// as one pipeline, and each caller gets its own reply; each call ran once,
// and the hooks saw every command and the caller's context values.
func TestBatchEachCallerItsOwnReply(t *testing.T) {
	srv := redistest.Start(t)
	n, rec := newNode(t, srv, redis.Options{ReadTimeout: 10 * time.Second})
	ctx := context.WithValue(t.Context(), traceKey{}, "span")
	_, err := n.Eval(ctx, echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()

	const calls = 200
	srv.Pause()
	outs := make([]<-chan outcome, calls)
	for i := range outs {
		outs[i] = evalAsync(ctx, n, "k"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	lanes := goredis.MaxLanes
	waitLoad(t, n, lanes, calls-lanes)
	srv.Resume()
	for i, out := range outs {
		o := <-out
		if o.err != nil || o.reply.Str(0) != "v"+strconv.Itoa(i) {
			t.Errorf("call %d: %v, %v; want v%d", i, o.reply, o.err, i)
		}
	}
	for i := range calls {
		if got := srv.MustDo(t, "GET", "k"+strconv.Itoa(i)); got != "1" {
			t.Errorf("k%d = %s; want 1 (each call run once)", i, got)
		}
	}
	alone, pipelines, batched := rec.counts()
	if alone != lanes || pipelines != 1 || batched != calls-lanes {
		t.Errorf("sent %d alone and %d pipelines of %d calls in all; want %d alone and 1 pipeline of %d",
			alone, pipelines, batched, lanes, calls-lanes)
	}
	if rec.untraced != 0 {
		t.Errorf("%d pipelines ran without the callers' context values", rec.untraced)
	}
}

// TestBatchUnderLoad: with no server paused, concurrent callers still
// share round trips, and each gets its own reply.
func TestBatchUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	n, rec := newNode(t, srv, redis.Options{})
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()

	const workers, rounds = 64, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := "w" + strconv.Itoa(w)
			for i := range rounds {
				arg := key + ":" + strconv.Itoa(i)
				r, err := n.Eval(t.Context(), echo, []string{key}, arg)
				if err != nil || r.Str(0) != arg {
					t.Errorf("%s: %v, %v", arg, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	alone, pipelines, batched := rec.counts()
	if alone+batched != workers*rounds {
		t.Fatalf("hooks saw %d commands alone and %d in pipelines; want %d in all", alone, batched, workers*rounds)
	}
	// How many calls find a lane free depends on how fast this machine
	// turns them around; some must have shared one.
	if pipelines == 0 || alone+pipelines >= workers*rounds {
		t.Errorf("%d calls took %d round trips (%d alone, %d pipelines); want fewer, some pipelined",
			workers*rounds, alone+pipelines, alone, pipelines)
	}
	t.Logf("%d calls: %d alone, %d pipelines", workers*rounds, alone, pipelines)
}

// TestLoneCallGoesAtOnce: a caller alone is sent at once, as a plain
// command, never held for a batch.
func TestLoneCallGoesAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	n, rec := newNode(t, srv, redis.Options{})
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()
	for i := range 50 {
		_, err := n.Eval(t.Context(), echo, []string{"lone"}, strconv.Itoa(i))
		require.NoError(t, err)
	}
	if alone, pipelines, _ := rec.counts(); alone != 50 || pipelines != 0 {
		t.Errorf("50 calls one after another: %d alone, %d pipelines; want 50, 0", alone, pipelines)
	}
}

// TestBatchNoScript: calls in a batch that the server answers NOSCRIPT
// (it lost its scripts) are sent again, each run once, with its own reply.
func TestBatchNoScript(t *testing.T) {
	srv := redistest.Start(t)
	// One lane: the EVAL sent again for the lone call queues behind the
	// batch, so the batch surely meets the flushed cache.
	n, rec := newNode(t, srv, redis.Options{PoolSize: 1, ReadTimeout: 10 * time.Second})
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	srv.MustDo(t, "SCRIPT", "FLUSH")
	rec.reset()

	const calls = 50
	srv.Pause()
	outs := make([]<-chan outcome, calls)
	for i := range outs {
		outs[i] = evalAsync(t.Context(), n, "ns"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	waitLoad(t, n, 1, calls-1)
	srv.Resume()
	for i, out := range outs {
		o := <-out
		if o.err != nil || o.reply.Str(0) != "v"+strconv.Itoa(i) {
			t.Errorf("call %d: %v, %v; want v%d", i, o.reply, o.err, i)
		}
		if got := srv.MustDo(t, "GET", "ns"+strconv.Itoa(i)); got != "1" {
			t.Errorf("ns%d = %s; want 1 (each call run once)", i, got)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	noScript := 0
	for _, p := range rec.pipelines {
		for _, cmd := range p {
			if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				noScript++
			}
		}
	}
	if noScript == 0 {
		t.Errorf("no pipeline met NOSCRIPT; the case was not made")
	}
}

// TestBatchConnectionKilled: a batch whose connection is killed fails its
// own calls and no others; the batch behind it, and later calls, succeed.
func TestBatchConnectionKilled(t *testing.T) {
	srv := redistest.Start(t)
	// One lane, so each batch waits for the one before it; no retries, so
	// that a lost connection is seen rather than hidden by a resend.
	n, rec := newNode(t, srv, redis.Options{PoolSize: 1, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()

	srv.MustDo(t, "CLIENT", "PAUSE", "20000", "WRITE")
	defer srv.Do("CLIENT", "UNPAUSE")
	lone := evalAsync(t.Context(), n, "a", "a")
	waitUntil(t, func() bool { return blocked(t, srv) == 1 }, "the lone call held by the server")

	const first, second = 20, 10
	batch1 := make([]<-chan outcome, first)
	for i := range batch1 {
		batch1[i] = evalAsync(t.Context(), n, "b"+strconv.Itoa(i), "b")
	}
	waitLoad(t, n, 1, first)
	srv.MustDo(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	if o := <-lone; o.err == nil {
		t.Fatalf("lone call on a killed connection: %v; want an error", o.reply)
	}
	waitUntil(t, func() bool { return rec.began() == 1 && blocked(t, srv) == 1 }, "the first batch held by the server")

	batch2 := make([]<-chan outcome, second)
	for i := range batch2 {
		batch2[i] = evalAsync(t.Context(), n, "c"+strconv.Itoa(i), "c"+strconv.Itoa(i))
	}
	waitLoad(t, n, 1, second)
	srv.MustDo(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	for i, out := range batch1 {
		if o := <-out; o.err == nil || errors.Is(o.err, context.Canceled) {
			t.Errorf("first batch, call %d: %v, %v; want the connection's error", i, o.reply, o.err)
		}
	}
	waitUntil(t, func() bool { return rec.began() == 2 && blocked(t, srv) == 1 }, "the second batch held by the server")
	srv.MustDo(t, "CLIENT", "UNPAUSE")
	for i, out := range batch2 {
		if o := <-out; o.err != nil || o.reply.Str(0) != "c"+strconv.Itoa(i) {
			t.Errorf("second batch, call %d: %v, %v; want c%d", i, o.reply, o.err, i)
		}
	}
	r, err := n.Eval(t.Context(), echo, []string{"after"}, "after")
	if err != nil || r.Str(0) != "after" {
		t.Fatalf("call after the kills: %v, %v; want after", r, err)
	}
	alone, pipelines, batched := rec.counts()
	if alone != 2 || pipelines != 2 || batched != first+second {
		t.Errorf("sent %d alone, %d pipelines of %d calls; want 2, 2 of %d", alone, pipelines, batched, first+second)
	}
}

// TestBatchCallerGivesUp: a caller whose ctx ends returns at once, whether
// its call waits in the queue (it is then not sent) or in a batch on a
// hung server (the others in that batch still get their replies, even on
// a client made with ContextTimeoutEnabled). Close waits for that batch.
func TestBatchCallerGivesUp(t *testing.T) {
	srv := redistest.Start(t)
	before := goleak.IgnoreCurrent()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true,
		PoolSize: 1, MaxRetries: -1, ReadTimeout: 10 * time.Second, ContextTimeoutEnabled: true})
	defer c.Close()
	rec := &recorder{}
	c.AddHook(rec)
	n := goredis.New(c)
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)

	resume := srv.PauseOnce()
	defer resume()
	loneCtx, cancelLone := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelLone()
	lone := evalAsync(loneCtx, n, "lone", "lone")
	waitLoad(t, n, 1, 0)

	queuedCtx, cancelQueued := context.WithCancel(t.Context())
	queued := evalAsync(queuedCtx, n, "queued", "queued")
	waitLoad(t, n, 1, 1)
	cancelQueued()
	if o := <-queued; !errors.Is(o.err, context.Canceled) || o.took > time.Second {
		t.Fatalf("queued caller cancelled: %v after %v; want context.Canceled at once", o.err, o.took)
	}

	inBatchCtx, cancelInBatch := context.WithCancel(t.Context())
	defer cancelInBatch()
	inBatch := evalAsync(inBatchCtx, n, "gives-up", "gives-up")
	others := make([]<-chan outcome, 5)
	for i := range others {
		others[i] = evalAsync(t.Context(), n, "other"+strconv.Itoa(i), "other"+strconv.Itoa(i))
	}
	waitLoad(t, n, 1, 1+len(others)+1) // the cancelled one is still in the queue, marked
	// go-redis's own read deadline may fire a moment before ctx reports
	// its end: the error is then the client's timeout.
	if o := <-lone; o.err == nil {
		t.Fatalf("lone call past its deadline on a stopped server: %v; want an error", o.reply)
	}
	waitUntil(t, func() bool { return rec.began() == 1 }, "the batch sent")
	cancelInBatch()
	if o := <-inBatch; !errors.Is(o.err, context.Canceled) || o.took > 3*time.Second {
		t.Fatalf("caller in a batch cancelled: %v after %v; want context.Canceled at once", o.err, o.took)
	}

	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a batch in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	resume()
	for i, out := range others {
		if o := <-out; o.err != nil || o.reply.Str(0) != "other"+strconv.Itoa(i) {
			t.Errorf("call %d in the batch of one that gave up: %v, %v; want other%d", i, o.reply, o.err, i)
		}
	}
	require.NoError(t, <-closed)
	if got := srv.MustDo(t, "EXISTS", "queued"); got != "0" {
		t.Errorf("the call cancelled while queued ran")
	}
	_, pipelines, batched := rec.counts()
	if pipelines != 1 || batched != 1+len(others) {
		t.Errorf("%d pipelines of %d calls; want 1 of %d", pipelines, batched, 1+len(others))
	}
	r, err := n.Eval(t.Context(), echo, []string{"after"}, "after")
	if err != nil || r.Str(0) != "after" {
		t.Fatalf("call after Close: %v, %v; want after", r, err)
	}
	require.NoError(t, c.Close())
	goleak.VerifyNone(t, before)
}

// TestWithoutBatching: the option sends every call by itself.
func TestWithoutBatching(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true, ReadTimeout: 10 * time.Second})
	defer c.Close()
	rec := &recorder{}
	c.AddHook(rec)
	n := goredis.New(c, goredis.WithoutBatching())
	defer n.Close()
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()
	srv.Pause()
	outs := make([]<-chan outcome, 20)
	for i := range outs {
		outs[i] = evalAsync(t.Context(), n, "wb"+strconv.Itoa(i), "x")
	}
	time.Sleep(50 * time.Millisecond)
	srv.Resume()
	for _, out := range outs {
		require.NoError(t, (<-out).err)
	}
	if alone, pipelines, _ := rec.counts(); alone != 20 || pipelines != 0 {
		t.Errorf("20 concurrent calls without batching: %d alone, %d pipelines; want 20, 0", alone, pipelines)
	}
}

// TestBatchCluster: on a cluster client, calls queue per master and each
// master's batch carries only its own keys; every caller gets its reply.
func TestBatchCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), DisableIdentity: true, ReadTimeout: 10 * time.Second})
	defer c.Close()
	rec := &recorder{}
	c.AddHook(rec)
	n := goredis.New(c)
	defer n.Close()
	const calls = 120
	owner := make([]int, calls)
	perMaster := make([]int, 3)
	for i := range calls {
		owner[i] = cl.Owner(cl.Slot("cl" + strconv.Itoa(i)))
		perMaster[owner[i]]++
		// Each master learns the script, and the client the slots.
		_, err := n.Eval(t.Context(), echo, []string{"warm" + strconv.Itoa(i)}, "w")
		require.NoError(t, err)
	}
	for m, k := range perMaster {
		require.Greater(t, k, goredis.MaxLanes, "keys on master %d", m)
	}
	rec.reset()

	for _, s := range cl.Servers() {
		s.Pause()
	}
	outs := make([]<-chan outcome, calls)
	for i := range outs {
		outs[i] = evalAsync(t.Context(), n, "cl"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	waitLoad(t, n, 3*goredis.MaxLanes, calls-3*goredis.MaxLanes)
	for _, s := range cl.Servers() {
		s.Resume()
	}
	for i, out := range outs {
		if o := <-out; o.err != nil || o.reply.Str(0) != "v"+strconv.Itoa(i) {
			t.Errorf("call %d: %v, %v; want v%d", i, o.reply, o.err, i)
		}
	}
	alone, pipelines, batched := rec.counts()
	if alone != 3*goredis.MaxLanes || pipelines != 3 || batched != calls-3*goredis.MaxLanes {
		t.Errorf("sent %d alone and %d pipelines of %d calls; want %d alone and 3 pipelines of %d",
			alone, pipelines, batched, 3*goredis.MaxLanes, calls-3*goredis.MaxLanes)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, p := range rec.pipelines {
		masters := map[int]bool{}
		for _, cmd := range p {
			key := cmd.Args()[3]
			if s, ok := key.(*string); ok {
				key = *s
			}
			masters[cl.Owner(cl.Slot(key.(string)))] = true
		}
		if len(masters) != 1 {
			t.Errorf("a pipeline of %d calls spans masters %v; want one", len(p), masters)
		}
	}
}

// TestBatchServerRestart: the calls of a batch in flight when the server
// dies fail, each with an error of its own; once the server is back
// (without its scripts), calls succeed again, batched.
func TestBatchServerRestart(t *testing.T) {
	srv := redistest.Start(t)
	n, rec := newNode(t, srv, redis.Options{PoolSize: 1, ReadTimeout: 10 * time.Second})
	_, err := n.Eval(t.Context(), echo, []string{"warm"}, "w")
	require.NoError(t, err)
	rec.reset()

	srv.Pause()
	lone := evalAsync(t.Context(), n, "lone", "lone")
	waitLoad(t, n, 1, 0)
	outs := make([]<-chan outcome, 20)
	for i := range outs {
		outs[i] = evalAsync(t.Context(), n, "r"+strconv.Itoa(i), "r")
	}
	waitLoad(t, n, 1, len(outs))
	srv.Kill()
	if o := <-lone; o.err == nil {
		t.Fatalf("lone call to a server that died: %v; want an error", o.reply)
	}
	for i, out := range outs {
		if o := <-out; o.err == nil {
			t.Errorf("batched call %d to a server that died: %v; want an error", i, o.reply)
		}
	}
	if _, pipelines, _ := rec.counts(); pipelines == 0 {
		t.Errorf("no pipeline was sent to the dying server; the case was not made")
	}
	srv.Restart()
	// go-redis holds back its dials for a while after they failed.
	waitUntil(t, func() bool {
		_, err := n.Eval(t.Context(), echo, []string{"probe"}, "p")
		return err == nil
	}, "a call once the server is back")
	rec.reset()
	outs = make([]<-chan outcome, 50)
	for i := range outs {
		outs[i] = evalAsync(t.Context(), n, "back"+strconv.Itoa(i), "back"+strconv.Itoa(i))
	}
	for i, out := range outs {
		if o := <-out; o.err != nil || o.reply.Str(0) != "back"+strconv.Itoa(i) {
			t.Errorf("call %d once the server is back: %v, %v; want back%d", i, o.reply, o.err, i)
		}
	}
	if alone, pipelines, batched := rec.counts(); alone+batched < len(outs) {
		t.Errorf("hooks saw %d calls alone and %d in %d pipelines; want at least %d", alone, batched, pipelines, len(outs))
	}
}
