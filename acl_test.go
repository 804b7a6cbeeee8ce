package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
)

// The least-privilege users of docs/deployment.md: the test reads their
// ACL SETUSER lines from the doc, so that the lines a reader pastes are the
// ones tested.

// aclPassword stands in the doc's lines for the user's password.
const aclPassword = "CHANGE-ME"

// aclUsers are the users the doc gives a line for, each with what it is
// for: the exercise that must pass under exactly that line, and the
// scripts (registered by lua.Script, by name prefix) its line must
// allow every command of.
var aclUsers = []struct {
	name    string
	scripts []string
	servers int
	run     func(ctx context.Context, a aclRun) error
}{
	{"dlock-single", []string{"single/", "notice/"}, 1, aclSingle},
	{"dlock-quorum", []string{"quorum/", "notice/"}, 3, aclQuorum},
	{"dlock-permits", []string{"permits/"}, 1, aclPermits},
	{"dlock-rwlock", []string{"rwlock/"}, 1, aclRWLock},
	{"dlock-claims", []string{"claims/"}, 1, aclClaims},
	{"dlock-ratelimit", []string{"ratelimit/"}, 3, aclRateLimit},
	{"dlock-fence", []string{"fence/"}, 1, aclFence},
}

// aclGoSide are the commands the node adapters and Open send themselves,
// beside the scripts' own: a line may grant these and what its scripts
// call, nothing else.
var aclGoSide = []string{"ping", "evalsha", "eval", "script|load", "subscribe", "unsubscribe"}

// aclLines reads the doc's ACL SETUSER lines, by user name.
func aclLines(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("docs/deployment.md")
	require.NoError(t, err)
	lines := map[string][]string{}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "ACL" || f[1] != "SETUSER" {
			continue
		}
		if _, dup := lines[f[2]]; dup {
			t.Fatalf("docs/deployment.md: two ACL SETUSER lines for %s", f[2])
		}
		lines[f[2]] = f[3:]
	}
	for _, u := range aclUsers {
		rules := lines[u.name]
		if len(rules) < 3 || !slices.Equal(rules[:3], []string{"reset", "on", ">" + aclPassword}) {
			t.Fatalf("docs/deployment.md: the line for %s is %q; want it to start with reset on >%s", u.name, rules, aclPassword)
		}
	}
	return lines
}

// aclRun is one run of an exercise: the servers, the user it logs in as,
// the client library, and a prefix that keeps its keys apart from other
// runs on the same servers.
type aclRun struct {
	addrs        []string
	user, client string
	prefix       string
	attempted    func() bool // whether a waiter has made its first attempt
	listening    func() bool // whether the first server has a channel subscribed
}

// open opens a Locker as the run's user, with cfg's strategy and TTLs.
func (a aclRun) open(ctx context.Context, cfg dlock.Config) (*dlock.Client, error) {
	cfg.Addrs, cfg.Username, cfg.Password, cfg.Client = a.addrs, a.user, aclPassword, a.client
	return dlock.Open(ctx, cfg)
}

// node opens a single-server Locker as the run's user for its Node, on
// which the primitives run; close closes both.
func (a aclRun) node(ctx context.Context) (n node.Node, close func(), err error) {
	lk, err := a.open(ctx, dlock.Config{})
	if err != nil {
		return nil, nil, err
	}
	n = lk.Nodes()[0]
	return n, func() { _ = lk.Close() }, nil
}

// slowRetry makes a waiter's next attempt come half a minute or more
// after its first: a waiter granted sooner was woken by the release's
// notice, which needs the user's PUBLISH (in the scripts) and SUBSCRIBE.
var slowRetry = option.Retry(time.Minute, time.Minute)

// wakeWait is how long a woken waiter may take; far above what a wake-up
// takes on a loaded machine, far below slowRetry's delay.
const wakeWait = 5 * time.Second

// waitAfter starts acquire, as a waiter, then calls release once the
// waiter has made its first attempt (so that only a notice can wake it
// before its slow retry), and returns the waiter's lease or error.
func waitAfter(ctx context.Context, srv string, acquire func(ctx context.Context) (*lease.Lease, error), attempted func() bool, release func() error) (*lease.Lease, error) {
	type result struct {
		l   *lease.Lease
		err error
	}
	ctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		l, err := acquire(ctx)
		done <- result{l, err}
	}()
	for deadline := time.Now().Add(2 * time.Second); !attempted() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := release(); err != nil {
		cancel()
		<-done
		return nil, fmt.Errorf("release before the waiter on %s: %w", srv, err)
	}
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("the waiter, not woken by the release: %w", r.err)
	}
	return r.l, nil
}

// subscribed says whether some connection listens on srv on a channel
// that matches pattern: dlock's ("dlock:*"), as a waiter has subscribed
// before its attempt, or any ("*").
func subscribed(srv *redistest.Server, pattern string) func() bool {
	return func() bool {
		out, err := srv.Do("PUBSUB", "CHANNELS", pattern)
		return err == nil && out != ""
	}
}

// aclLocker runs what a Locker's user does: acquire, try a held lock,
// extend, wait and be woken by a release, inspect, several keys at once,
// and an election on it.
func aclLocker(ctx context.Context, a aclRun, lk *dlock.Client, attempted func() bool) error {
	key := a.prefix + "job"
	l, err := lk.TryAcquire(ctx, key, option.Metadata("acl test"))
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, dlock.ErrTaken) {
		return fmt.Errorf("try a held lock: %v; want ErrTaken", err)
	}
	// A waiter that gives up leaves the queue.
	gctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = lk.Acquire(gctx, key)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("a waiter that gives up: %v; want the deadline", err)
	}
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	info, err := lk.Inspect(ctx, key)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	for _, n := range info.Nodes {
		if n.Err != nil {
			return fmt.Errorf("inspect: node %s: %w", n.Node, n.Err)
		}
	}
	if !info.Held || info.Metadata != "acl test" || info.Token != l.Token() {
		return fmt.Errorf("inspect: %+v; want the lease's metadata and token", info)
	}
	next, err := waitAfter(ctx, a.addrs[0], func(ctx context.Context) (*lease.Lease, error) {
		return lk.Acquire(ctx, key, slowRetry)
	}, attempted, func() error { return l.Release(ctx) })
	if err != nil {
		return err
	}
	if err := next.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	{
		all, err := lk.TryAcquireAll(ctx, []string{a.prefix + "a", a.prefix + "b"})
		if err != nil {
			return fmt.Errorf("acquire all: %w", err)
		}
		if err := all.Release(ctx); err != nil {
			return fmt.Errorf("release all: %w", err)
		}
	}
	office, err := election.New(lk, a.prefix+"office")
	if err != nil {
		return err
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders, err := office.Observe(octx)
	if err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	<-leaders // vacant
	cctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	term, err := office.Campaign(cctx, "me")
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	select {
	case seen := <-leaders:
		if seen.Token != term.Token() {
			return fmt.Errorf("observed %+v; want the term's token %v", seen, term.Token())
		}
	case <-time.After(wakeWait):
		return errors.New("observe: the term's announcement never came")
	}
	return term.Resign(ctx)
}

func aclSingle(ctx context.Context, a aclRun) error {
	lk, err := a.open(ctx, dlock.Config{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	defer lk.Close()
	return aclLocker(ctx, a, lk, a.attempted)
}

func aclQuorum(ctx context.Context, a aclRun) error {
	// Without DurableNodes: the lost-data guard reads INFO, and a fresh
	// quorum sits out one MaxTTL (3s here) before it grants.
	lk, err := a.open(ctx, dlock.Config{Strategy: connect.StrategyQuorum, TTL: 3 * time.Second, MaxTTL: 3 * time.Second})
	if err != nil {
		return err
	}
	defer lk.Close()
	// Try until the servers vote (a failed try leaves nothing held): a
	// node sits out at first, and a first call on a new connection, its
	// script flushed, may outlast the node timeout on a loaded machine. A
	// refusal of the user's rules is no timeout: it fails the call, and
	// the ACL LOG shows it.
	for deadline := time.Now().Add(2 * wakeWait); ; time.Sleep(50 * time.Millisecond) {
		l, err := lk.TryAcquire(ctx, a.prefix+"first")
		if err == nil {
			if err := l.Release(ctx); err != nil {
				return fmt.Errorf("first release: %w", err)
			}
			break
		}
		var qe *quorum.Error
		if !errors.As(err, &qe) || !slices.ContainsFunc(qe.Nodes, func(n quorum.NodeAnswer) bool {
			return n.Kind == quorum.KindSitsOut || n.Kind == quorum.KindTimeout
		}) ||
			time.Now().After(deadline) {
			return fmt.Errorf("first acquire: %w", err)
		}
	}
	return aclLocker(ctx, a, lk, a.attempted)
}

func aclPermits(ctx context.Context, a aclRun) error {
	n, closeNode, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeNode()
	sem, err := permits.New(n)
	if err != nil {
		return err
	}
	name := a.prefix + "export"
	p, err := sem.Acquire(ctx, name, 1)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if _, err := sem.TryAcquire(ctx, name, 1); !errors.Is(err, dlock.ErrTaken) {
		return fmt.Errorf("try a held permit: %v; want ErrTaken", err)
	}
	if err := p.Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	// The waiter is another process's: a Semaphore hands its own waiters
	// their grant by the release's reply, another's by its notice.
	other, closeOther, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeOther()
	sem2, err := permits.New(other)
	if err != nil {
		return err
	}
	next, err := waitAfter(ctx, a.addrs[0], func(ctx context.Context) (*lease.Lease, error) {
		return sem2.Acquire(ctx, name, 1, slowRetry)
	}, a.attempted, func() error { return p.Release(ctx) })
	if err != nil {
		return err
	}
	return next.Release(ctx)
}

func aclRWLock(ctx context.Context, a aclRun) error {
	n, closeNode, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeNode()
	rw, err := rwlock.New(n)
	if err != nil {
		return err
	}
	key := a.prefix + "table"
	r1, err := rw.AcquireShared(ctx, key)
	if err != nil {
		return fmt.Errorf("read lease: %w", err)
	}
	r2, err := rw.TryAcquireShared(ctx, key)
	if err != nil {
		return fmt.Errorf("second read lease: %w", err)
	}
	if _, err := rw.TryAcquire(ctx, key); !errors.Is(err, dlock.ErrTaken) {
		return fmt.Errorf("write lock under readers: %v; want ErrTaken", err)
	}
	if err := r1.Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if err := r2.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if _, err := rw.Inspect(ctx, key); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	other, closeOther, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeOther()
	rw2, err := rwlock.New(other)
	if err != nil {
		return err
	}
	w, err := waitAfter(ctx, a.addrs[0], func(ctx context.Context) (*lease.Lease, error) {
		return rw2.Acquire(ctx, key, slowRetry)
	}, a.attempted, func() error { return r1.Release(ctx) })
	if err != nil {
		return err
	}
	return w.Release(ctx)
}

func aclClaims(ctx context.Context, a aclRun) error {
	n, closeNode, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeNode()
	q, err := claims.New(n, a.prefix+"jobs")
	if err != nil {
		return err
	}
	if err := q.Add(ctx, "1", "2"); err != nil {
		return fmt.Errorf("add: %w", err)
	}
	c, err := q.Claim(ctx)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if err := c.Lease().Extend(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if err := c.Retry(ctx); err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	for range 2 {
		c, err := q.Claim(ctx)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if err := c.Complete(ctx); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
	}
	if _, err := q.Stats(ctx); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	// An empty queue: ClaimWait waits, woken by Add.
	ctx, cancel := context.WithTimeout(ctx, wakeWait)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		c, err := q.ClaimWait(ctx, slowRetry)
		if err == nil {
			err = c.Complete(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(2 * time.Second); !a.attempted() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := q.Add(ctx, "3"); err != nil {
		cancel()
		<-got
		return fmt.Errorf("add: %w", err)
	}
	if err := <-got; err != nil {
		return fmt.Errorf("claim wait, not woken by the add: %w", err)
	}
	// The served waiter's subscription ends a little later, with an
	// UNSUBSCRIBE (what +unsubscribe is for): wait for it, at most 3 s,
	// rather than close the connection first and so never send it.
	for deadline := time.Now().Add(3 * time.Second); a.listening() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func aclRateLimit(ctx context.Context, a aclRun) error {
	// One server, through a single Locker's Node (Open checks it with
	// PING), then the three as a quorum's.
	one := a
	one.addrs = a.addrs[:1]
	lk1, err := one.open(ctx, dlock.Config{})
	if err != nil {
		return err
	}
	defer lk1.Close()
	lk, err := a.open(ctx, dlock.Config{Strategy: connect.StrategyQuorum})
	if err != nil {
		return err
	}
	defer lk.Close()
	for _, ns := range [][]node.Node{lk1.Nodes(), lk.Nodes()} {
		rl, err := ratelimit.New(ns, ratelimit.Limit{Rate: 2, Per: time.Minute, Burst: 2})
		if err != nil {
			return err
		}
		key := fmt.Sprintf("%scalls-%d", a.prefix, len(ns))
		// One server admits the burst, 2, and refuses the third. Three
		// admit at most 3 in the minute (docs/ratelimit.md: N×B/M, when
		// a call decided on two nodes has not yet landed on the third,
		// as a first call's NOSCRIPT and EVAL can make it), and refuse
		// the fourth whatever the order.
		calls, most := 3, 2
		if len(ns) > 1 {
			calls, most = 4, len(ns)*2/(len(ns)/2+1)
		}
		admitted, err := allowN(ctx, rl, key, calls, most)
		if cerr := rl.Close(); err == nil {
			err = cerr
		}
		if err == nil && len(ns) == 1 && admitted != most {
			err = fmt.Errorf("one node admitted %d of %d; want %d", admitted, calls, most)
		}
		if err != nil {
			return fmt.Errorf("on %d nodes: %w", len(ns), err)
		}
	}
	return nil
}

// allowN makes calls Allow calls on key and returns how many rl admitted:
// the first must be, the last must not, and no more than most.
func allowN(ctx context.Context, rl *ratelimit.Limiter, key string, calls, most int) (int, error) {
	admitted := 0
	for i := range calls {
		r, err := rl.Allow(ctx, key)
		if err != nil {
			return admitted, fmt.Errorf("allow %d: %w", i, err)
		}
		if r.Allowed {
			admitted++
		}
		if i == 0 && !r.Allowed || i == calls-1 && r.Allowed || admitted > most {
			return admitted, fmt.Errorf("allow %d: allowed %v, %d admitted; want the first admitted, the last refused, %d at most", i, r.Allowed, admitted, most)
		}
	}
	return admitted, nil
}

func aclFence(ctx context.Context, a aclRun) error {
	n, closeNode, err := a.node(ctx)
	if err != nil {
		return err
	}
	defer closeNode()
	store := fence.NewStore(n)
	key := "report:" + a.prefix
	if err := store.Put(ctx, key, "new", 7); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if err := store.Put(ctx, key, "old", 6); !errors.Is(err, dlock.ErrStale) {
		return fmt.Errorf("put with an older token: %v; want ErrStale", err)
	}
	if v, tok, ok, err := store.Get(ctx, key); err != nil || !ok || v != "new" || tok != 7 {
		return fmt.Errorf("get: %q %v %v %v; want new under 7", v, tok, ok, err)
	}
	return nil
}

// aclServers starts the servers every run of the tests below shares, one
// set per user.
func aclServers(t *testing.T) map[string][]*redistest.Server {
	t.Helper()
	out := map[string][]*redistest.Server{}
	for _, u := range aclUsers {
		out[u.name] = redistest.StartN(t, u.servers)
	}
	return out
}

var aclRuns atomic.Int64

// aclTry creates user as rules say on srvs, runs u's exercise as it on
// client, and returns the servers' ACL LOG of the run (what they refused,
// even to a script's pcall) and the exercise's error.
func aclTry(t *testing.T, srvs []*redistest.Server, name string, rules []string, client string, run func(context.Context, aclRun) error) (log string, runErr error) {
	t.Helper()
	n := aclRuns.Add(1)
	user := fmt.Sprintf("%s-%d", name, n)
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		_ = s.MustDo(t, "ACL", "LOG", "RESET")
		// Each run starts as a client's first does, with no script
		// cached: EVALSHA answered NOSCRIPT, then EVAL.
		_ = s.MustDo(t, "SCRIPT", "FLUSH")
		_ = s.MustDo(t, append([]string{"ACL", "SETUSER", user}, rules...)...)
		addrs[i] = s.Addr()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*wakeWait)
	defer cancel()
	a := aclRun{addrs: addrs, user: user, client: client, prefix: fmt.Sprintf("acl%d:", n)}
	a.attempted, a.listening = subscribed(srvs[0], "dlock:*"), subscribed(srvs[0], "*")
	runErr = run(ctx, a)
	for _, s := range srvs {
		out := s.MustDo(t, "ACL", "LOG")
		if out != "" {
			log += s.Addr() + ": " + strings.ReplaceAll(out, "\n", " ") + "\n"
		}
		_ = s.MustDo(t, "ACL", "DELUSER", user)
	}
	return log, runErr
}

// TestACLLeastPrivilege runs each user's exercise, on both clients, as a
// user created with exactly the doc's line: it must pass, with nothing
// refused on the way (the ACL LOG stays empty).
func TestACLLeastPrivilege(t *testing.T) {
	lines := aclLines(t)
	srvs := aclServers(t)
	for _, u := range aclUsers {
		for _, client := range redistest.Clients {
			t.Run(u.name+"/"+client, func(t *testing.T) {
				log, err := aclTry(t, srvs[u.name], u.name, lines[u.name], client, u.run)
				if err != nil || log != "" {
					t.Fatalf("as %s %s: %v; refused: %s", u.name, lines[u.name], err, log)
				}
			})
		}
	}
}

// aclUntried are the rules, by "user rule", that the exercises do not
// show needed, and why each is in the line all the same. The scripts that
// need them are checked against the line by TestACLCoversScripts.
var aclUntried = map[string]string{
	"dlock-quorum +script|load": "speed: a server process's first vote runs the INFO check and loads the script of its later votes, which skip it; " +
		"without SCRIPT LOAD every vote runs the check",
	"dlock-single +persist":  persistWhy,
	"dlock-permits +persist": persistWhy,
	"dlock-rwlock +persist":  persistWhy,

	"dlock-single +zremrangebyscore":  goneWhy,
	"dlock-permits +zremrangebyscore": goneWhy,
	"dlock-claims +zremrangebyscore":  goneWhy,
	"dlock-quorum +zremrangebyscore":  goneWhy,
	"dlock-claims +pexpire":           goneWhy,
	"dlock-claims +pttl":              goneWhy,

	"dlock-quorum +hget":   "looks at the ticket of a head of the queue other than the caller's own (a waiter ahead of it, or one that died waiting)",
	"dlock-claims +del":    "an item completed, its done record lapsed, and added again",
	"dlock-claims +exists": "a claim that finds items returned to the queue while it ran",
	"dlock-claims +get":    "a claim's extend or finish refused after its lease lapsed and a later claim completed the item",

	"dlock-ratelimit +del": "a quorum's refund that empties a node's limit: a request fewer than a majority admitted, on a limit no other request had touched",
}

const (
	persistWhy = "keeps a key's counter for ever: only with an idle TTL below zero (option.IdleTTL, Config.IdleTTL)"
	goneWhy    = "the record of an owner given up after a call whose reply was lost (a timeout, a broken connection): a fault the exercise does not make"
)

// TestACLEachNeeded drops each rule after "reset on >password" from each
// user's line in turn, and wants the exercise to fail or the server to
// refuse something: no rule of the doc's lines is there for nothing that
// the exercises do.
func TestACLEachNeeded(t *testing.T) {
	lines := aclLines(t)
	srvs := aclServers(t)
	for _, u := range aclUsers {
		rules := lines[u.name]
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			for i := 3; i < len(rules); i++ {
				if why, ok := aclUntried[u.name+" "+rules[i]]; ok {
					t.Logf("%s: not dropped: %s", rules[i], why)
					continue
				}
				t.Run(rules[i], func(t *testing.T) {
					less := slices.Delete(slices.Clone(rules), i, i+1)
					log, err := aclTry(t, srvs[u.name], u.name, less, redistest.Clients[0], u.run)
					if err == nil && log == "" {
						t.Fatalf("as %s without %s: the exercise passed, nothing refused", u.name, rules[i])
					}
					t.Logf("without %s: %v; refused: %s", rules[i], err, log)
				})
			}
		})
	}
}

var scriptCall = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'|pcall\(redis\.call,\s*'([A-Za-z]+)'`)

// TestACLCoversScripts checks each line against the scripts of its
// packages: it allows every command they call, and no command beyond them
// and the adapters' own (aclGoSide); its keys are dlock's (the fence
// Store's, the reader's own) and so are its channels.
func TestACLCoversScripts(t *testing.T) {
	lines := aclLines(t)
	for _, u := range aclUsers {
		want := map[string]bool{}
		for _, prefix := range u.scripts {
			scripts := lua.Scripts(prefix)
			require.NotEmpty(t, scripts, prefix)
			for _, s := range scripts {
				srcs := []string{s.Script.Source()}
				if first := s.Script.First(); first != nil {
					srcs = append(srcs, first.Source())
				}
				for _, src := range srcs {
					for _, m := range scriptCall.FindAllStringSubmatch(src, -1) {
						want[strings.ToLower(m[1]+m[2])] = true
					}
				}
			}
		}
		granted := map[string]bool{}
		for _, r := range lines[u.name][3:] {
			switch {
			case strings.HasPrefix(r, "+"):
				granted[strings.TrimPrefix(r, "+")] = true
			case r == "~dlock:*" || r == "&dlock:*" || u.name == "dlock-fence" && strings.HasPrefix(r, "~"):
			default:
				t.Errorf("%s: rule %q: want only +command, ~dlock:* and &dlock:*", u.name, r)
			}
		}
		for c := range want {
			if !granted[c] {
				t.Errorf("%s: its scripts call %s, which its line does not allow", u.name, strings.ToUpper(c))
			}
		}
		for c := range granted {
			if !want[c] && !slices.Contains(aclGoSide, c) {
				t.Errorf("%s: its line allows %s, which neither its scripts nor the adapters send", u.name, c)
			}
		}
	}
}
