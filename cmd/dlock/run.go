package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/rwlock"
)

const runUsage = `Usage: dlock run [flags] --key KEY -- CMD [ARGS...]
       dlock run [flags] --keys KEY1,KEY2,... -- CMD [ARGS...]

Runs CMD while holding the lock on KEY, like flock(1) across hosts. The
lease is renewed at a third of --ttl while CMD runs, and released when CMD
exits; dlock then exits with CMD's exit code. CMD gets DLOCK_KEY and
DLOCK_TOKEN (the lease's fencing token: pass it to every write you fence)
in its environment, and runs in a process group of its own.

With --permits N, KEY names a semaphore of N permits instead of a lock
(single strategy only): CMD runs while it holds one of them, so at most N
run at once across hosts. CMD also gets DLOCK_SLOT, the permit's slot
(0..N-1); DLOCK_TOKEN is then the permit's token, to fence per slot with
the key KEY#SLOT.

With --keys, CMD runs while dlock holds the locks of every key listed, all
taken at once or none: two runs asking for overlapping keys, in any
order, neither deadlock nor both hold a key. CMD gets DLOCK_KEYS (the keys)
and DLOCK_TOKENS (each key's token, in the same order, comma-separated);
DLOCK_KEY and DLOCK_TOKEN are the first key's.

With --shared, KEY names a read-write lock (single strategy only) and CMD
runs while it holds a read lock of it, beside any other readers; with
--exclusive, while it holds its write lock, alone. Readers queue behind a
waiting writer and writers behind waiting readers, first come, first
served. The read-write lock of KEY is another lock than run's plain lock
of KEY: readers and their writers must all use these two flags. The
readers after a writer share a DLOCK_TOKEN above that writer's.

With --rate N/PERIOD, KEY names a rate limit instead of a lock: dlock
waits (up to --wait) until the limit admits one more run, then runs CMD,
holding nothing: at most N runs start per PERIOD across hosts, in bursts
of up to --burst (default N). PERIOD is a unit (ms, s, m, h, d) or a
duration (10/s, 100/m, 5/1h, 3/500ms). It works on both strategies: a
quorum admits when a majority of its servers does (docs/ratelimit.md).
CMD gets DLOCK_KEY, no DLOCK_TOKEN. --wait 0 makes one attempt; a run
not admitted exits 75. --rate excludes --keys, --permits, --shared and
--exclusive; to also hold a lock, run dlock run inside dlock run --rate.

If the lease is lost (a renewal refused: someone else holds the lock; or
the servers unreachable until its validity ran out), dlock sends SIGTERM
to CMD's process group, SIGKILL after --grace, and exits 76. SIGINT,
SIGTERM and SIGHUP sent to dlock are forwarded to CMD's process group.

Examples:
  dlock run --key nightly-report -- ./report.sh --date today
  dlock run --key backup --wait 0 -- pg_dump -f /backups/db.sql   # skip if running elsewhere
  dlock run --url redis://lock.internal:6379/2 --key migrate --ttl 2m --wait 10m -- ./migrate
  dlock run --addrs r1:6379,r2:6379,r3:6379 --strategy quorum --key leader -- ./serve
  dlock run --url rediss://lock.internal:6380 --tls-ca /etc/redis/ca.pem --key migrate -- ./migrate
  dlock run --url redis+sentinel://s1,s2,s3/locks --key nightly -- ./nightly.sh   # the master Sentinels name "locks"
  DLOCK_URL=quorum://r1,r2,r3,r4,r5 dlock run --key rotate -- sh -c 'rotate --fence "$DLOCK_TOKEN"'
  dlock run --config /etc/dlock.conf --key cleanup -- ./cleanup   # url=... or addrs=... lines
  dlock run --permits 3 --key exporter -- ./export.sh   # at most 3 exports at once
  dlock run --keys acct:17,acct:42 -- ./transfer.sh 17 42   # both accounts, or wait
  dlock run --shared --key catalog -- ./read-catalog.sh      # many readers at once
  dlock run --exclusive --key catalog -- ./rebuild-catalog.sh   # one writer, no readers
  dlock run --rate 10/m --burst 2 --key api-sync --wait 5m -- ./sync.sh   # at most 10 starts a minute

Flags:
`

func runMain(args []string, stdout, stderr io.Writer) int {
	r, cfg, code, ok := parseRun(args, os.Getenv, stdout, stderr)
	if !ok {
		return code
	}
	if r.verbose {
		r.logf("servers from %s: %s", r.origin, describe(cfg))
	}
	return r.run(cfg)
}

// parseRun reads the arguments of dlock run, and the environment through
// getenv: the runner and the servers' Config, or, with ok false, the exit
// code, having said why on stderr (or printed the usage on stdout when
// asked for help). It reaches no server.
func parseRun(args []string, getenv func(string) string, stdout, stderr io.Writer) (r *runner, cfg dlock.Config, code int, ok bool) {
	fs := flag.NewFlagSet("dlock run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		conn    connFlags
		key     = fs.String("key", "", "the lock's key (this or --keys is required)")
		keyList = fs.String("keys", "", "comma-separated keys whose locks to hold all at once, all or none, instead of --key")
		wait    = fs.Duration("wait", time.Minute, "how long to wait for the lock; 0: one attempt")
		grace   = fs.Duration("grace", 10*time.Second, "after a lost lease, time between SIGTERM and SIGKILL to CMD")
		verbose = fs.Bool("v", false, "report acquisition and release on stderr")
		meta    = fs.String("metadata", defaultMetadata(), "stored with the lock for dlock inspect to show; empty for none (at most 512 bytes)")
		nperm   = fs.Int("permits", 0, "hold one of N permits of KEY rather than its lock (single strategy); 0: the lock")
		shared  = fs.Bool("shared", false, "hold a read lock of the read-write lock KEY, beside other readers (single strategy)")
		excl    = fs.Bool("exclusive", false, "hold the write lock of the read-write lock KEY, the writer to --shared readers (single strategy)")
		rate    = fs.String("rate", "", "N/PERIOD: run CMD once the rate limit KEY admits it (10/s, 100/m, 5/1h), holding no lock")
		burst   = fs.Int("burst", 0, "with --rate, how many runs may start at once; 0: N")
	)
	conn.register(fs)
	describeFlag(fs, settings.TTL, "lease TTL, renewed at a third of it while CMD runs", "the ttl of the URL or --config file, else 30s")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n", exitCodesHelp)
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return nil, cfg, code, false
	}
	argv := fs.Args()
	var keys []string
	if *keyList != "" {
		keys = strings.Split(*keyList, ",")
	}
	switch {
	case *key == "" && keys == nil:
		fmt.Fprintln(stderr, "dlock run: --key or --keys is required (dlock run --help)")
		return nil, cfg, exitUsage, false
	case *key != "" && keys != nil:
		fmt.Fprintln(stderr, "dlock run: --key and --keys exclude each other")
		return nil, cfg, exitUsage, false
	case keys != nil && (*nperm > 0 || *shared || *excl):
		fmt.Fprintln(stderr, "dlock run: --keys excludes --permits, --shared and --exclusive")
		return nil, cfg, exitUsage, false
	case len(argv) == 0:
		fmt.Fprintln(stderr, "dlock run: no command given: dlock run --key KEY -- CMD [ARGS...]")
		return nil, cfg, exitUsage, false
	case *wait < 0 || *grace < 0:
		fmt.Fprintln(stderr, "dlock run: --wait and --grace must be >= 0")
		return nil, cfg, exitUsage, false
	case *nperm < 0 || *nperm > permits.MaxPermits:
		fmt.Fprintf(stderr, "dlock run: --permits must be from 1 to %d (0: the lock itself)\n", permits.MaxPermits)
		return nil, cfg, exitUsage, false
	case *shared && *excl, (*shared || *excl) && *nperm > 0:
		fmt.Fprintln(stderr, "dlock run: --shared, --exclusive and --permits exclude each other")
		return nil, cfg, exitUsage, false
	case *rate != "" && (keys != nil || *nperm > 0 || *shared || *excl):
		fmt.Fprintln(stderr, "dlock run: --rate excludes --keys, --permits, --shared and --exclusive")
		return nil, cfg, exitUsage, false
	case *rate == "" && flagSet(fs, "burst"):
		fmt.Fprintln(stderr, "dlock run: --burst needs --rate")
		return nil, cfg, exitUsage, false
	}
	var limit *ratelimit.Limit
	if *rate != "" {
		l, err := parseRate(*rate, *burst)
		if err != nil {
			fmt.Fprintf(stderr, "dlock run: %v\n", err)
			return nil, cfg, exitUsage, false
		}
		limit = &l
	}
	cfg, source, err := conn.resolve(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "dlock run: %v\n", err)
		return nil, cfg, exitUsage, false
	}
	if *nperm > 0 && cfg.Strategy != "" && cfg.Strategy != connect.StrategySingle {
		fmt.Fprintf(stderr, "dlock run: --permits needs the single strategy, not %s: a majority of servers capping at N grants more than N (docs/permits.md)\n", cfg.Strategy)
		return nil, cfg, exitUsage, false
	}
	if (*shared || *excl) && cfg.Strategy != "" && cfg.Strategy != connect.StrategySingle {
		fmt.Fprintf(stderr, "dlock run: --shared and --exclusive need the single strategy, not %s: the read-write lock has no quorum form (docs/rwlock.md)\n", cfg.Strategy)
		return nil, cfg, exitUsage, false
	}
	rw := rwNone
	switch {
	case *shared:
		rw = rwRead
	case *excl:
		rw = rwWrite
	}
	if keys != nil {
		*key = *keyList
	}
	r = &runner{
		key: *key, keys: keys, ttl: cmp.Or(cfg.TTL, settings.DefaultTTL), wait: *wait, grace: *grace, argv: argv,
		verbose: *verbose, stderr: stderr, metadata: *meta, permits: *nperm, rw: rw,
		rate: limit, origin: origin(source, getenv),
	}
	return r, cfg, exitOK, true
}

type runner struct {
	key              string
	ttl, wait, grace time.Duration // ttl: the Config's, for messages
	argv             []string
	verbose          bool
	stderr           io.Writer
	metadata         string
	permits          int              // hold one of this many permits of key; 0: its lock
	rw               rwSide           // hold a side of the read-write lock key rather than its lock
	keys             []string         // hold the locks of all of these at once (key is them, joined)
	rate             *ratelimit.Limit // run once this rate limit on key admits it, holding nothing
	office, value    string           // campaign for this office (dlock elect) rather than lock key
	origin           string           // where the servers came from
	name             string           // the command, for messages: "run" or "elect"
}

// rwSide is which side of a read-write lock run holds, if any.
type rwSide int

const (
	rwNone  rwSide = iota // the plain lock
	rwRead                // --shared
	rwWrite               // --exclusive
)

// holding is what CMD runs under: a lease (run), or a term (elect).
type holding interface {
	Token() fence.Token
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// heldTerm is a term of office as a holding: its release is Resign.
type heldTerm struct{ *election.Term }

func (t heldTerm) Release(ctx context.Context) error { return t.Resign(ctx) }

// defaultMetadata names this process for dlock inspect: host, pid and the
// command's name, cut to lease.MaxMetadata.
func defaultMetadata() string {
	host, _ := os.Hostname()
	m := fmt.Sprintf("host=%s pid=%d", host, os.Getpid())
	if i := slices.Index(os.Args, "--"); i >= 0 && i+1 < len(os.Args) {
		m += " cmd=" + filepath.Base(os.Args[i+1])
	}
	return m[:min(len(m), lease.MaxMetadata)]
}

func (r *runner) logf(format string, args ...any) {
	name := r.name
	if name == "" {
		name = "run"
	}
	fmt.Fprintf(r.stderr, "dlock "+name+": "+format+"\n", args...)
}

func (r *runner) run(cfg dlock.Config) int {
	// Signals are caught from the start: one that arrives while waiting
	// for the lock ends the wait; once CMD runs, they are forwarded.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case s := <-sigs:
			cancel(signalError{s})
		case <-stopWatch:
		}
	}()
	endWatch := func() {
		close(stopWatch)
		<-watchDone
	}

	ls, locker, code := r.acquire(ctx, cfg)
	endWatch()
	if ls == nil {
		if locker != nil {
			_ = locker.Close()
		}
		return code
	}
	defer locker.Close()
	if r.verbose && r.rate == nil {
		r.logf("holding %q, token %v, ttl %v", r.key, ls.Token(), r.ttl)
	}
	return r.supervise(ls, sigs)
}

// signalError is the cause of a wait cut short by a signal.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "got signal " + e.sig.String() }

// acquire opens the Locker and takes the lease (or the term of office),
// or returns the exit code that says why not.
func (r *runner) acquire(ctx context.Context, cfg dlock.Config) (holding, *dlock.Client, int) {
	openCtx, cancelOpen := context.WithTimeout(ctx, 10*time.Second)
	locker, err := dlock.Open(openCtx, cfg)
	cancelOpen()
	if err != nil {
		return nil, nil, r.failed(ctx, "open", err)
	}
	if r.office != "" {
		return r.campaign(ctx, locker, cfg)
	}
	if r.rate != nil {
		return r.admit(ctx, locker, cfg)
	}
	// The lease's TTL is the Locker's, the Config's; the primitives take
	// the Config's settings that apply to them.
	opts := []option.Option{option.AutoRenew(true), option.Metadata(r.metadata)}
	try, wait := locker.TryAcquire, locker.Acquire
	if r.permits > 0 {
		sem, err := permits.New(locker.Nodes()[0], settings.OptionsFor(&cfg, settings.Permits)...)
		if err != nil {
			return nil, locker, r.failed(ctx, "open", err)
		}
		try = func(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
			return sem.TryAcquire(ctx, key, r.permits, opts...)
		}
		wait = func(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
			return sem.Acquire(ctx, key, r.permits, opts...)
		}
	}
	if r.rw != rwNone {
		rl, err := rwlock.New(locker.Nodes()[0], settings.OptionsFor(&cfg, settings.RWLock)...)
		if err != nil {
			return nil, locker, r.failed(ctx, "open", err)
		}
		try, wait = rl.TryAcquire, rl.Acquire
		if r.rw == rwRead {
			try, wait = rl.TryAcquireShared, rl.AcquireShared
		}
	}
	if r.keys != nil {
		try = func(ctx context.Context, _ string, opts ...option.Option) (*lease.Lease, error) {
			return locker.TryAcquireAll(ctx, r.keys, opts...)
		}
		wait = func(ctx context.Context, _ string, opts ...option.Option) (*lease.Lease, error) {
			return locker.AcquireAll(ctx, r.keys, opts...)
		}
	}
	var ls *lease.Lease
	if r.wait == 0 {
		ls, err = try(ctx, r.key, opts...)
	} else {
		wctx, cancelWait := context.WithTimeout(ctx, r.wait)
		ls, err = wait(wctx, r.key, opts...)
		cancelWait()
	}
	if err != nil {
		return nil, locker, r.failed(ctx, "acquire", err)
	}
	return ls, locker, exitOK
}

// campaign waits to be elected to r.office, for --wait when it is set.
func (r *runner) campaign(ctx context.Context, locker *dlock.Client, cfg dlock.Config) (holding, *dlock.Client, int) {
	e, err := election.New(locker, r.office, settings.OptionsFor(&cfg, settings.Election)...)
	if err != nil {
		return nil, locker, r.failed(ctx, "campaign", err)
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if r.wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, r.wait)
	}
	t, err := e.Campaign(wctx, r.value)
	cancel()
	if err != nil {
		return nil, locker, r.failed(ctx, "campaign", err)
	}
	return heldTerm{t}, locker, exitOK
}

// failed reports err and returns its exit code.
func (r *runner) failed(ctx context.Context, op string, err error) int {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		r.logf("%s %q: interrupted (%v)", op, r.key, se.sig)
		return exitSignal + int(se.sig.(syscall.Signal))
	}
	code := acquireExitCode(err)
	switch code {
	case exitTaken:
		if errors.Is(err, context.DeadlineExceeded) {
			r.logf("%s %q: held elsewhere; gave up after --wait %v", op, r.key, r.wait)
			return code
		}
	case exitAuth:
		r.logf("%s %q: authentication failed: check the username and password for the servers from %s: %v", op, r.key, r.origin, err)
		return code
	case exitUnavailable, exitUsage:
		r.logf("%s %q (servers from %s): %v", op, r.key, r.origin, err)
		return code
	}
	r.logf("%s %q: %v", op, r.key, err)
	return code
}

// acquireExitCode maps an error of Open or of an acquisition to an exit
// code. A wait that ran out is "held elsewhere" only when its last whole
// attempt found the lock taken (the error then matches ErrTaken): both
// strategies also retry attempts that failed for want of servers, and a
// wait that ended on those is an outage, which `|| [ $? -eq 75 ]` must
// not hide.
func acquireExitCode(err error) int {
	switch {
	case errors.Is(err, dlock.ErrInvalid):
		return exitUsage
	case errors.Is(err, dlock.ErrTaken):
		return exitTaken
	case errors.Is(err, dlock.ErrAuth):
		return exitAuth
	default:
		return exitUnavailable
	}
}

// supervise runs CMD under ls and returns dlock's exit code.
func (r *runner) supervise(ls holding, sigs <-chan os.Signal) int {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "DLOCK_KEY="+r.key)
	if r.rate == nil {
		cmd.Env = append(cmd.Env, "DLOCK_TOKEN="+ls.Token().String())
	}
	if l, ok := ls.(*lease.Lease); ok && r.keys != nil {
		held := l.Keys()
		toks := make([]string, len(held))
		for i, h := range held {
			toks[i] = h.Token.String()
		}
		cmd.Env = append(cmd.Env, "DLOCK_KEY="+r.keys[0], "DLOCK_KEYS="+strings.Join(r.keys, ","), "DLOCK_TOKENS="+strings.Join(toks, ","))
	}
	if l, ok := ls.(*lease.Lease); ok && r.permits > 0 {
		cmd.Env = append(cmd.Env, "DLOCK_SLOT="+strconv.Itoa(permits.Slot(l)))
	}
	if r.office != "" {
		cmd.Env = append(cmd.Env, "DLOCK_OFFICE="+r.office)
	}
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = r.release(ls)
		r.logf("start %s: %v", r.argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

wait:
	for {
		select {
		case s := <-sigs:
			signalGroup(cmd, s.(syscall.Signal))
		case <-ls.Done():
			r.logf("lease on %q ended while %s ran (%v): stopping it", r.key, r.argv[0], ls.Err())
			r.stop(cmd, exited, sigs)
			return exitLost
		case <-exited:
			break wait
		}
	}
	code := childExitCode(cmd, waitErr)
	if err := ls.Err(); err != nil {
		// The lease ended as CMD finished: its end may have come first.
		r.logf("lease on %q ended as %s exited (%v)", r.key, r.argv[0], err)
		return exitLost
	}
	if err := r.release(ls); errors.Is(err, lease.ErrNotHeld) {
		// The servers no longer held it: it ended (a break, a takeover)
		// before its release, perhaps while CMD ran.
		r.logf("lease on %q ended before %s's end was seen: its release was refused (%v)", r.key, r.argv[0], err)
		return exitLost
	}
	return code
}

// stop ends CMD's process group: SIGTERM, then SIGKILL after the grace
// period. Signals to dlock meanwhile are still forwarded.
func (r *runner) stop(cmd *exec.Cmd, exited <-chan struct{}, sigs <-chan os.Signal) {
	signalGroup(cmd, syscall.SIGTERM)
	t := time.NewTimer(r.grace)
	defer t.Stop()
	for {
		select {
		case <-exited:
			// The group may outlive its leader; nothing of it may run on
			// without the lock.
			signalGroup(cmd, syscall.SIGKILL)
			return
		case s := <-sigs:
			signalGroup(cmd, s.(syscall.Signal))
		case <-t.C:
			r.logf("%s still running after %v: SIGKILL", r.argv[0], r.grace)
			signalGroup(cmd, syscall.SIGKILL)
			<-exited
			return
		}
	}
}

// release releases ls and returns the error of a release that failed,
// having reported it unless the servers refused it as not held (the
// caller says what that means).
func (r *runner) release(ls holding) error {
	if r.rate != nil {
		return nil // an admission holds nothing
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	err := ls.Release(ctx)
	switch {
	case errors.Is(err, lease.ErrNotHeld):
	case err != nil:
		r.logf("release %q: %v (the lock ends with its TTL)", r.key, err)
	case r.verbose:
		r.logf("released %q", r.key)
	}
	return err
}

// childExitCode is CMD's exit code, or 128+n when signal n killed it.
func childExitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return exitSoftware
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
