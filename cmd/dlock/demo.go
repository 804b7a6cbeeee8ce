package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/sqlfence"
	"github.com/dlockgo/dlock/internal/pgproc"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

const demoUsage = `Usage: dlock demo [flags]

Shows, in about ten seconds, the four rows of the trade between the single
and quorum strategies, each with its outcome, and the fence in a database:

  [1] single lease: acquire, fenced write, a paused holder refused, release
  [2] failover of a replicated master: a second holder, fenced out by its
      smaller token; WAIT to a replica refuses the claim (needs redis-server)
  [3] quorum of 5 (lost-data guard on): locks still granted with 2 servers
      dead; single dies with its one
  [4] a paused holder with plain Redlock (no fence) and with dlock's quorum token
  [5] a paused holder's late write refused by PostgreSQL (fence/sqlfence), when
      PostgreSQL is installed (Debian's postgresql package, initdb on PATH, or
      DLOCK_PG_BIN naming the folder of initdb); skipped, and said so, when not

It starts its own servers on free 127.0.0.1 ports: real redis-server
processes when redis-server is on PATH (no persistence, stopped at the end
and on Ctrl-C), otherwise embedded in-process servers (miniredis), and says
which; PostgreSQL in a temporary folder (as the postgres user when run as
root), removed at the end. Nothing needs to be set up.

Examples:
  dlock demo
  dlock demo --client valkey-go
  dlock demo --embedded          # in-process servers even when redis-server is installed

Flags:
`

func demoMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dlock demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := &settingFlag{s: settings.Of(settings.Client)}
	fs.Var(client, client.s.Flag(), client.s.Doc)
	embedded := fs.Bool("embedded", false, "use embedded in-process servers even when redis-server is on PATH")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	f, err := newFleet(*embedded)
	if err != nil {
		fmt.Fprintf(stderr, "dlock demo: %v\n", err)
		return exitSoftware
	}
	d := &demo{ctx: ctx, out: stdout, f: f, client: connect.ClientGoRedis}
	if v, ok := client.v.(string); ok && v != "" {
		d.client = v
	}
	err = d.run()
	d.close()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "dlock demo: interrupted; every server it started is stopped")
		return exitSignal + int(syscall.SIGINT)
	case err != nil:
		fmt.Fprintf(stderr, "dlock demo: %v\n", err)
		return exitSoftware
	}
	return exitOK
}

// demo holds what one run of the demo started.
type demo struct {
	ctx     context.Context
	out     io.Writer
	f       *fleet
	client  string
	closers []func()
	single  *server // the server of row [1], killed in row [3]
}

func (d *demo) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.f.close()
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// step prints one action and its outcome, aligned.
func (d *demo) step(action, outcome string, args ...any) {
	fmt.Fprintf(d.out, "    %-54s -> %s\n", action, fmt.Sprintf(outcome, args...))
}

func (d *demo) servers(n int, args ...string) ([]*server, error) {
	out := make([]*server, n)
	for i := range out {
		s, err := d.f.start(d.ctx, args...)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func (d *demo) nodes(ss ...*server) []node.Node {
	addrs := make([]string, len(ss))
	for i, s := range ss {
		addrs[i] = s.Addr()
	}
	nodes, closeNodes := dialNodes(addrs, d.client)
	d.closers = append(d.closers, closeNodes)
	return nodes
}

func (d *demo) sleep(t time.Duration) error {
	select {
	case <-d.ctx.Done():
		return d.ctx.Err()
	case <-time.After(t):
		return nil
	}
}

func (d *demo) run() error {
	if d.f.real {
		d.printf("dlock demo: servers are real redis-server %s processes on 127.0.0.1, started now and stopped at the end.", d.f.version)
	} else {
		d.printf("dlock demo: redis-server is not on PATH (or --embedded): servers are embedded in-process miniredis")
		d.printf("servers on 127.0.0.1 (their key expiry is driven from the wall clock by the demo). Row [2] needs redis-server.")
	}
	d.printf("client library: %s\n", d.client)
	steps := []func() error{d.singleLease, d.failover, d.quorum, d.pause, d.postgres}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
		d.printf("")
	}
	d.printf("every server the demo started is stopped; see docs/trade.md for the measured trade.")
	return nil
}

// resource is the protected resource of rows [1], [2] and [4]: a fenced
// register (fence.Store) on a server of its own.
func (d *demo) resource() (*fence.Store, *server, error) {
	ss, err := d.servers(1)
	if err != nil {
		return nil, nil, err
	}
	return fence.NewStore(d.nodes(ss[0])[0]), ss[0], nil
}

func (d *demo) put(st *fence.Store, who, value string, t fence.Token) {
	d.fenced(fmt.Sprintf("%s writes %q with token %v", who, value, t), "accepted", "REFUSED", st.Put(d.ctx, "resource", value, t))
}

// fenced prints a fenced write's outcome, err: accepted, refused as
// stale (with the highest token), or failed.
func (d *demo) fenced(action, accepted, refused string, err error) {
	switch {
	case err == nil:
		d.step(action, "%s", accepted)
	case errors.Is(err, fence.ErrStale):
		d.step(action, "%s: %s", refused, staleSummary(err))
	default:
		d.step(action, "error: %v", err)
	}
}

func (d *demo) singleServer() (*server, error) {
	if d.single == nil {
		ss, err := d.servers(1)
		if err != nil {
			return nil, err
		}
		d.single = ss[0]
	}
	return d.single, nil
}

// [1] single: acquire, fenced write, stale holder refused, release.
func (d *demo) singleLease() error {
	srv, err := d.singleServer()
	if err != nil {
		return err
	}
	st, _, err := d.resource()
	if err != nil {
		return err
	}
	lk, err := single.New(d.nodes(srv)[0])
	if err != nil {
		return err
	}
	d.printf("[1] single: one lease on one server (%s), fenced by its attempts counter", srv.Port())
	const ttl = time.Second
	a, err := lk.TryAcquire(d.ctx, "report", option.TTL(ttl))
	if err != nil {
		return err
	}
	d.step(`A acquires "report", ttl 1s`, "granted, token %v", a.Token())
	d.put(st, "A", "from A", a.Token())
	d.step("A pauses 1.5s, past its TTL (a GC stop, a frozen VM)", "no renewal")
	if err := d.sleep(ttl + ttl/2); err != nil {
		return err
	}
	b, err := lk.TryAcquire(d.ctx, "report", option.TTL(10*time.Second))
	if err != nil {
		return err
	}
	d.step(`B acquires "report"`, "granted, token %v (A's lease ran out by the server's clock)", b.Token())
	d.put(st, "B", "from B", b.Token())
	d.put(st, "A wakes and", "from A, stale", a.Token())
	if err := a.Release(d.ctx); errors.Is(err, fence.ErrStale) {
		d.step("A releases", "refused: not held, and %s", staleSummary(err))
	} else if err != nil {
		d.step("A releases", "refused: %v", err)
	} else {
		d.step("A releases", "ok (unexpected)")
	}
	if err := b.Release(d.ctx); err != nil {
		return err
	}
	d.step("B releases", "ok")
	v, t, _, err := st.Get(d.ctx, "resource")
	if err != nil {
		return err
	}
	d.printf("  => single: the paused holder was fenced out at the resource, which holds %q (token %v)", v, t)
	return nil
}

// [2] the failover race on a master and its replica.
func (d *demo) failover() error {
	d.printf("[2] single, failover of a replicated master (asynchronous replication)")
	if !d.f.real {
		d.step("master + replica, replica stalled, master killed", "needs redis-server: not run with embedded servers")
		d.printf("  => skipped: embedded servers have no replication; install redis-server and run dlock demo again")
		return nil
	}
	ms, err := d.servers(1)
	if err != nil {
		return err
	}
	master := ms[0]
	host, port, _ := strings.Cut(master.Addr(), ":")
	rs, err := d.servers(1, "--replicaof", host, port)
	if err != nil {
		return err
	}
	replica := rs[0]
	if err := d.waitSynced(master, replica); err != nil {
		return err
	}
	st, _, err := d.resource()
	if err != nil {
		return err
	}
	d.step(fmt.Sprintf("master %s, replica %s", master.Port(), replica.Port()), "replica synced")
	if _, err := replica.do(d.ctx, "CLIENT", "PAUSE", "10000", "WRITE"); err != nil {
		return err
	}
	d.step("the replica stalls (CLIENT PAUSE 10000 WRITE)", "it applies no writes for now")

	nodes := d.nodes(master)
	waiting, err := single.New(nodes[0], option.Replicas(1, 100*time.Millisecond))
	if err != nil {
		return err
	}
	if _, err := waiting.TryAcquire(d.ctx, "job-acked", option.TTL(10*time.Second)); err != nil {
		d.step("with WAIT to 1 replica: A acquires", "refused: %v", err)
	} else {
		d.step("with WAIT to 1 replica: A acquires", "granted (unexpected)")
	}
	lk, err := single.New(nodes[0])
	if err != nil {
		return err
	}
	a, err := lk.TryAcquire(d.ctx, "job", option.TTL(10*time.Second))
	if err != nil {
		return err
	}
	d.step(`without WAIT: A acquires "job" on the master`, "granted, token %v", a.Token())
	d.put(st, "A", "from A", a.Token())

	master.kill()
	if _, err := replica.do(d.ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		return err
	}
	if _, err := replica.do(d.ctx, "CLIENT", "UNPAUSE"); err != nil {
		return err
	}
	d.step("master SIGKILLed; replica promoted (REPLICAOF NO ONE)", "A's claim never reached it")
	lk2, err := single.New(d.nodes(replica)[0])
	if err != nil {
		return err
	}
	b, err := lk2.TryAcquire(d.ctx, "job", option.TTL(10*time.Second))
	if err != nil {
		d.step(`B acquires "job" on the new master`, "refused: %v (unexpected)", err)
		return nil
	}
	if b.Token() > a.Token() {
		d.step(`B acquires "job" on the new master`, "GRANTED, token %v (larger than A's), while A's lease still runs", b.Token())
	} else {
		d.step(`B acquires "job" on the new master`, "GRANTED, token %v (not above A's: unexpected), while A's lease still runs", b.Token())
	}
	d.put(st, "B", "from B", b.Token())
	d.put(st, "A", "from A, again", a.Token())
	v, t, _, err := st.Get(d.ctx, "resource")
	if err != nil {
		return err
	}
	d.printf("  => failover: TWO HOLDERS at once (the claim died with the master); B's token, floored at the server's clock,")
	d.printf("     is larger, so the fence refused A's write (resource holds %q, token %v).", v, t)
	d.printf("     WAIT to replicas (option.Replicas) refused the unreplicated claim: no second holder at all.")
	_ = b.Release(d.ctx)
	return nil
}

func (d *demo) waitSynced(master, replica *server) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err1 := replica.do(d.ctx, "INFO", "replication")
		m, err2 := master.do(d.ctx, "INFO", "replication")
		if err1 == nil && err2 == nil && strings.Contains(r, "master_link_status:up") &&
			strings.Contains(m, "port="+strings.TrimPrefix(replica.Port(), ":")+",state=online") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s did not sync with %s within 10s", replica.Addr(), master.Addr())
		}
		if err := d.sleep(20 * time.Millisecond); err != nil {
			return err
		}
	}
}

// quorumOf starts five servers and a quorum Locker over them. Embedded
// servers are declared durable: they never restart, and have no process
// identity (INFO's run_id) for the lost-data guard to tell a restart by.
func (d *demo) quorumOf(opts ...option.Option) (*quorum.Locker, []*server, error) {
	ss, err := d.servers(5)
	if err != nil {
		return nil, nil, err
	}
	if !d.f.real {
		opts = append(opts, option.DurableNodes(true))
	}
	lk, err := quorum.New(d.nodes(ss...), append([]option.Option{
		option.TTL(time.Second), option.NodeTimeout(200 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	d.closers = append(d.closers, func() { _ = lk.Close() })
	return lk, ss, nil
}

func ports(ss []*server) string {
	p := make([]string, len(ss))
	for i, s := range ss {
		p[i] = s.Port()
	}
	return strings.Join(p, " ")
}

// guard says how the demo's quorums treat lost data.
func (d *demo) guard() string {
	if d.f.real {
		return "lost-data guard on"
	}
	return "embedded servers declared durable (lost-data guard off)"
}

// sitOut explains the wait of a first acquisition on fresh servers.
func (d *demo) sitOut() string {
	if d.f.real {
		return " (fresh servers sit out one max TTL: the lost-data guard)"
	}
	return ""
}

// acquireFresh waits out the lost-data guard of fresh nodes.
func (d *demo) acquireFresh(lk *quorum.Locker, key string) (*lease.Lease, time.Duration, error) {
	t0 := time.Now()
	l, err := d.acquireWithin(lk, key, 10*time.Second)
	return l, time.Since(t0), err
}

// acquireWithin is a blocking Acquire that gives up after wait.
func (d *demo) acquireWithin(lk *quorum.Locker, key string, wait time.Duration) (*lease.Lease, error) {
	ctx, cancel := context.WithTimeout(d.ctx, wait)
	defer cancel()
	return lk.Acquire(ctx, key)
}

func (d *demo) holders(lk *quorum.Locker, l *lease.Lease) int {
	info, err := lk.Inspect(d.ctx, l.Key())
	if err != nil {
		return 0
	}
	n := 0
	for _, ni := range info.Nodes {
		if ni.Owner == l.Owner() {
			n++
		}
	}
	return n
}

// [3] quorum with a minority dead, next to a single server that died.
func (d *demo) quorum() error {
	// The lost-data guard is on, as by default: the fresh servers sit out
	// one max TTL (1s here), then are repaired node-wide, after which any
	// key can be locked while a majority (3 of 5) lives.
	lk, ss, err := d.quorumOf()
	if err != nil {
		return err
	}
	d.printf("[3] quorum: Redlock across 5 servers (%s), 3 needed, %s, ttl 1s", ports(ss), d.guard())
	a, took, err := d.acquireFresh(lk, "leader")
	if err != nil {
		return err
	}
	d.step(`A acquires "leader"`, "granted after %v%s, token %v, held on %d of 5 servers",
		took.Round(100*time.Millisecond), d.sitOut(), a.Token(), d.holders(lk, a))
	if err := a.Release(d.ctx); err != nil {
		return err
	}
	ss[3].kill()
	ss[4].kill()
	d.step("A releases; 2 of 5 servers killed", "%s and %s down", ss[3].Port(), ss[4].Port())
	// B and E wait a little, as callers do: the release goes on in the
	// background on the servers past the majority, and a loaded machine
	// may answer one vote late.
	b, err := d.acquireWithin(lk, "leader", 2*time.Second)
	if err != nil {
		d.step(`B acquires "leader"`, "refused: %s", quorumSummary(err))
	} else {
		d.step(`B acquires "leader"`, "GRANTED, token %v, held on %d of 5 servers", b.Token(), d.holders(lk, b))
		_ = b.Release(d.ctx)
	}
	e, err := d.acquireWithin(lk, "nightly", 2*time.Second)
	if err != nil {
		d.step(`E acquires "nightly", a key never locked before`, "refused: %s (unexpected)", quorumSummary(err))
	} else {
		d.step(`E acquires "nightly", a key never locked before`, "GRANTED, token %v, held on %d of 5 servers", e.Token(), d.holders(lk, e))
		_ = e.Release(d.ctx)
	}
	ss[2].kill()
	_, err = lk.TryAcquire(d.ctx, "leader")
	d.step(fmt.Sprintf("a 3rd server killed (%s); C acquires", ss[2].Port()), "refused: %s", quorumSummary(err))

	srv, err := d.singleServer()
	if err != nil {
		return err
	}
	single1, err := single.New(d.nodes(srv)[0])
	if err != nil {
		return err
	}
	srv.kill()
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
	_, err = single1.TryAcquire(ctx, "report")
	cancel()
	if err == nil {
		d.step(fmt.Sprintf("compare: the one server of [1] killed (%s); D acquires", srv.Port()), "granted (unexpected)")
	} else {
		d.step(fmt.Sprintf("compare: the one server of [1] killed (%s); D acquires", srv.Port()), "FAILS: lock service down")
	}
	if b != nil && e != nil {
		d.printf("  => quorum: locks still granted with 2 of 5 servers dead, refused with 3 dead; a single lease dies with its server")
	} else {
		d.printf("  => quorum: no lock with 2 of 5 servers dead (unexpected)")
	}
	return nil
}

func staleSummary(err error) string {
	var se *fence.StaleError
	if errors.As(err, &se) {
		return fmt.Sprintf("stale token %v, %v seen since", se.Token, se.Highest)
	}
	return err.Error()
}

func quorumSummary(err error) string {
	var qe *quorum.Error
	if errors.As(err, &qe) {
		return fmt.Sprintf("%d of %d servers agreed, %d needed", qe.Got, len(qe.Nodes), qe.Needed)
	}
	if err == nil {
		return "granted (unexpected)"
	}
	return err.Error()
}

// [4] a paused holder: plain Redlock cannot fence it, the quorum token can.
func (d *demo) pause() error {
	d.printf("[4] a paused holder, quorum of 5, ttl 1s")
	plain, _, err := d.quorumOf(option.Tokens(false))
	if err != nil {
		return err
	}
	_, res, err := d.resource()
	if err != nil {
		return err
	}
	reg := d.nodes(res)[0]
	write := func(who, value string) {
		// A plain register: nothing to compare a token with.
		_, err := reg.Eval(d.ctx, setScript, []string{"plain"}, value)
		if err != nil {
			d.step(fmt.Sprintf("%s writes %q (plain SET)", who, value), "error: %v", err)
			return
		}
		d.step(fmt.Sprintf("%s writes %q (plain SET)", who, value), "written")
	}

	d.printf("  plain Redlock (option.Tokens(false)): leases carry no token")
	a, took, err := d.acquireFresh(plain, "invoice")
	if err != nil {
		return err
	}
	d.step(`A acquires "invoice"`, "granted after %v%s, token %v (none)",
		took.Round(100*time.Millisecond), d.sitOut(), a.Token())
	d.step("A pauses 1.5s, past its TTL", "no renewal")
	if err := d.sleep(1500 * time.Millisecond); err != nil {
		return err
	}
	b, _, err := d.acquireFresh(plain, "invoice")
	if err != nil {
		return err
	}
	d.step(`B acquires "invoice"`, "granted")
	write("B", "from B")
	write("A wakes and", "from A, stale")
	v, err := reg.Eval(d.ctx, getScript, []string{"plain"})
	if err != nil {
		return err
	}
	_ = b.Release(d.ctx)
	unfenced := v.Str(0)

	d.printf("  dlock's quorum token (the default)")
	fenced, _, err := d.quorumOf()
	if err != nil {
		return err
	}
	st := fence.NewStore(reg)
	a, _, err = d.acquireFresh(fenced, "invoice")
	if err != nil {
		return err
	}
	d.step(`A acquires "invoice"`, "granted, token %v", a.Token())
	d.step("A pauses 1.5s, past its TTL", "no renewal")
	if err := d.sleep(1500 * time.Millisecond); err != nil {
		return err
	}
	b, _, err = d.acquireFresh(fenced, "invoice")
	if err != nil {
		return err
	}
	d.step(`B acquires "invoice"`, "granted, token %v", b.Token())
	d.put(st, "B", "from B", b.Token())
	d.put(st, "A wakes and", "from A, stale", a.Token())
	_ = b.Release(d.ctx)
	fv, _, _, err := st.Get(d.ctx, "resource")
	if err != nil {
		return err
	}
	d.printf("  => paused holder: without a fence the stale write landed (register holds %q);", unfenced)
	d.printf("     with dlock's quorum token the resource refused it (register holds %q)", fv)
	return nil
}

var (
	setScript = node.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
	getScript = node.NewScript(`return redis.call('GET', KEYS[1])`)
)

// [5] the fence where the data lives: a row of PostgreSQL that carries
// its token, written through sqlfence as a user's code would.
func (d *demo) postgres() error {
	d.printf("[5] the fence in PostgreSQL: a row that carries its token (fence/sqlfence)")
	pg, err := pgproc.Start()
	if errors.Is(err, pgproc.ErrNotInstalled) {
		d.step("PostgreSQL", "not installed: step skipped (Debian's postgresql package, or %s)", pgproc.BinEnv)
		return nil
	}
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { _ = pg.Stop() })
	db, err := sql.Open("pgx", pg.DSN("postgres"))
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { db.Close() })
	if _, err := db.ExecContext(d.ctx, `CREATE TABLE invoices (id INT PRIMARY KEY, body TEXT NOT NULL, token BIGINT NOT NULL);
		INSERT INTO invoices VALUES (1, 'draft', 0)`); err != nil {
		return err
	}
	d.step(fmt.Sprintf("PostgreSQL on 127.0.0.1:%d", pg.Port()), "table invoices, row 1 at token 0")
	ss, err := d.servers(1)
	if err != nil {
		return err
	}
	lk, err := single.New(d.nodes(ss[0])[0])
	if err != nil {
		return err
	}
	invoices := sqlfence.Table{Name: "invoices", Key: "id"}
	update := func(who, body string, t fence.Token) {
		d.fenced(fmt.Sprintf("%s updates row 1 to %q", who, body), fmt.Sprintf("committed under token %v", t),
			"REFUSED by PostgreSQL", invoices.Update(d.ctx, db, 1, t, sqlfence.Set{"body": body}))
	}
	const ttl = time.Second
	a, err := lk.TryAcquire(d.ctx, "invoice-1", option.TTL(ttl))
	if err != nil {
		return err
	}
	d.step(`A acquires "invoice-1", ttl 1s`, "granted, token %v", a.Token())
	update("A", "from A", a.Token())
	d.step("A pauses 1.5s, past its TTL", "no renewal")
	if err := d.sleep(ttl + ttl/2); err != nil {
		return err
	}
	b, err := lk.TryAcquire(d.ctx, "invoice-1", option.TTL(10*time.Second))
	if err != nil {
		return err
	}
	d.step(`B acquires "invoice-1"`, "granted, token %v", b.Token())
	update("B", "from B", b.Token())
	update("A wakes and", "from A, stale", a.Token())
	if err := b.Release(d.ctx); err != nil {
		return err
	}
	var (
		body string
		tok  int64
	)
	if err := db.QueryRowContext(d.ctx, "SELECT body, token FROM invoices WHERE id = 1").Scan(&body, &tok); err != nil {
		return err
	}
	d.printf("  => PostgreSQL: the row holds %q (token %d); the paused holder's UPDATE ... WHERE token <= its own changed nothing", body, tok)
	return nil
}
