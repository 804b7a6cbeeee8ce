// Package redistest starts real server processes for tests (redis-server,
// or the binary DLOCK_SERVER names: see redisproc.ServerPath): one per
// call, on a free loopback port, in its own temporary directory, stopped by
// pid when the test ends (passed or failed).
//
// Servers run without persistence (--save ” --appendonly no) unless
// WithAOF asks for it, so a Kill followed by Restart loses every key: the
// data-loss case the lock strategies must survive.
package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/redisproc"
)

func init() {
	// Tests kill and pause servers on purpose; go-redis would log every
	// failed redial of those to stderr and bury the test output. Errors
	// still reach the tests through the calls that hit them.
	redis.SetLogger(quietLogger{})
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// startTimeout bounds how long a start (or restart) waits for PING to
// answer, and a Do for its reply. Generous: a server that loads its AOF on
// a machine running a soak's dozen other servers (each forking for its
// snapshots) has been seen to answer only after 5 s, and a restart that
// gives up too early fails the run for the harness, not for dlock.
const startTimeout = 20 * time.Second

// Option changes how a Server is started.
type Option func(*config)

type config struct {
	aof     bool
	args    []string
	env     []string
	replica *Server
	via     string // the address a replica dials for its master; "" is the master's own
	tls     *Certs
	tlsAuth TLSClients
	conf    string // a config file, first on the command line; "" for none
	bus     bool   // a cluster bus port of its own, drawn with the port

	user, password string // see WithAuth
	sentinelPass   string // see WithSentinelPassword
}

// WithAOF turns persistence on: appendonly yes with appendfsync always, in
// the Server's directory, so Restart after Kill reloads every acknowledged
// write.
func WithAOF() Option { return func(c *config) { c.aof = true } }

// WithArgs appends args to the redis-server command line; later flags win
// over the defaults.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithEnv adds KEY=value entries to the redis-server environment (on top of
// the test's own), for instance an LD_PRELOAD.
func WithEnv(env ...string) Option {
	return func(c *config) { c.env = append(c.env, env...) }
}

// WithReplicaOf starts the Server as a replica of master. Use WaitSynced to
// wait for the first sync.
func WithReplicaOf(master *Server) Option { return func(c *config) { c.replica = master } }

// WithReplicaVia makes a WithReplicaOf replica dial its master at addr (a
// Proxy in front of the master) instead of the master's own address, so
// that a test can slow or cut the replication link.
func WithReplicaVia(addr string) Option { return func(c *config) { c.via = addr } }

// WithAuth makes the Server ask for credentials: password for the default
// user (requirepass) when user is empty, else for the ACL user user, who
// may run every command on every key and channel, while the default user
// is off. The Server's own client (Do, the readiness check) logs in; a
// WithReplicaOf replica logs in to its master with the same credentials
// (masteruser, masterauth), and StartSentinels gives them to its
// Sentinels (sentinel auth-user, auth-pass).
func WithAuth(user, password string) Option {
	return func(c *config) { c.user, c.password = user, password }
}

// Server is one server process owned by a test. Its methods fail the
// test (t.Fatal) on errors the test cannot sensibly handle, and must then be
// called from the test's goroutine; Do and WaitSynced return errors instead.
type Server struct {
	t    testing.TB
	cfg  config
	bin  string // the server binary, from redisproc.ServerPath
	dir  string
	port int
	bus  int // the cluster bus port when cfg.bus, else 0

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	client  *redis.Client
	stopped bool
}

// Start starts one server and returns once it answers PING. The
// process is killed when the test and its subtests end.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := redisproc.ServerPath()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.cfg)
	}
	t.Cleanup(s.cleanup)
	for range 5 {
		s.port, err = redisproc.FreePort()
		if err == nil && s.cfg.bus {
			// A bus port taken since the last draw fails the bind as the
			// port does: both are drawn again.
			s.bus, err = redisproc.FreePort()
		}
		if err != nil {
			t.Fatalf("redistest: free port: %v", err)
		}
		err = s.start()
		if err == nil {
			return s
		}
		if !errors.Is(err, errBind) {
			break
		}
	}
	t.Fatalf("redistest: start %s: %v", bin, err)
	return nil
}

// StartN starts n servers with the same options.
func StartN(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	ss := make([]*Server, n)
	for i := range ss {
		ss[i] = Start(t, opts...)
	}
	return ss
}

// Addr returns host:port, always on 127.0.0.1.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the TCP port the server listens on; it stays the same across
// Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (log, AOF).
func (s *Server) Dir() string { return s.dir }

// Pid returns the process id of the running process, or 0 after Kill.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill sends SIGKILL and waits until the process is gone. Killing a server
// that is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// Pause stops the process with SIGSTOP: connections stay open, commands hang.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// MustDo is Do for a test's setup and checks: it fails t on an error.
func (s *Server) MustDo(t testing.TB, args ...string) string {
	t.Helper()
	got, err := s.Do(args...)
	if err != nil {
		t.Fatalf("redistest: %v: %v", args, err)
	}
	return got
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// PauseOnce pauses the server (Pause) and returns resume, which continues
// it (Resume) the first time it is called and does nothing after: a test
// defers it, so that the server runs again however the test ends, and
// calls it where the test means to resume the server.
func (s *Server) PauseOnce() (resume func()) {
	s.Pause()
	var once sync.Once
	return func() { once.Do(s.Resume) }
}

// Restart starts the server again on the same port, with the same options
// and directory, killing it first if it still runs. With WithAOF it reloads
// its data; without, it comes back empty (unless WithArgs turned
// persistence on: it then reloads what its files hold).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.StartAgain(); err != nil {
		s.t.Fatal(err)
	}
}

// StartAgain is Restart returning its error instead of failing the test, so
// that it may be called from any goroutine.
func (s *Server) StartAgain() error {
	s.Kill()
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.start()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errBind) || time.Now().After(deadline) {
			return fmt.Errorf("redistest: restart on port %d: %w", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the process runs (paused or not).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Signal sends sig to the running process. Unlike Pause and Resume it
// returns its error instead of failing the test, so that it may be called
// from any goroutine.
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redistest: %v to %s: not running", sig, s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: %v to %s: %w", sig, s.Addr(), err)
	}
	return nil
}

// Wipe deletes what the server persisted in its directory (the RDB
// snapshot and the AOF), so that the next start comes back empty whatever
// its persistence settings. The server must not be running.
func (s *Server) Wipe() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redistest: wipe %s: still running", s.Addr())
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if n == "dump.rdb" || n == "appendonlydir" || strings.HasSuffix(n, ".rdb") || strings.HasSuffix(n, ".aof") {
			if err := os.RemoveAll(filepath.Join(s.dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetReplicaOf sets the master that later starts (Restart, StartAgain)
// replicate from, dialled at via when it is not empty (see WithReplicaVia);
// a nil master makes them start as a master. The running process is left
// as it is: send it REPLICAOF for that.
func (s *Server) SetReplicaOf(master *Server, via string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.replica, s.cfg.via = master, via
}

// Do runs one command on a client owned by the Server and returns its reply
// as text: strings as they are, integers in decimal, nil as "" with
// redis.Nil, arrays as their elements joined by newlines. It is meant for
// test setup and inspection, and gives up after 5 s. Calls go through a
// connection pool, so two calls may use two connections: a WAIT sent by Do
// does not count an earlier Do's write.
func (s *Server) Do(args ...string) (string, error) {
	c := s.doClient()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	v, err := c.Do(ctx, a...).Result()
	if err != nil {
		return "", err
	}
	return text(v), nil
}

// doClient returns the client Do uses, made on first use.
func (s *Server) doClient() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{
			Addr:            s.Addr(),
			Protocol:        2,
			DisableIdentity: true,
			TLSConfig:       s.clientTLS(),
			Username:        s.cfg.user,
			Password:        s.cfg.password,
		})
	}
	return s.client
}

// ScriptStats returns how many script calls (EVAL and EVALSHA) s has run
// since it started or its stats were reset, and the µs it spent in them,
// from INFO commandstats.
func (s *Server) ScriptStats() (calls int, usec float64, err error) {
	out, err := s.Do("INFO", "commandstats")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_eval:") && !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		c, err := strconv.Atoi(statField(line, "calls"))
		if err != nil {
			return 0, 0, fmt.Errorf("redistest: commandstats line %q: %w", line, err)
		}
		u, err := strconv.ParseFloat(statField(line, "usec"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("redistest: commandstats line %q: %w", line, err)
		}
		calls += c
		usec += u
	}
	return calls, usec, nil
}

// statField returns the value of name in an INFO line of name=value pairs
// ("cmdstat_eval:calls=3,usec=12,...").
func statField(line, name string) string {
	_, rest, _ := strings.Cut(line, ":")
	for kv := range strings.SplitSeq(rest, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case nil:
		return ""
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = text(e)
		}
		return strings.Join(parts, "\n")
	default:
		return fmt.Sprint(v)
	}
}

// Info returns one field of INFO (for instance "master_link_status"), or ""
// when the field is absent.
func (s *Server) Info(field string) (string, error) {
	out, err := s.Do("INFO")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", nil
}

// WaitSynced waits until this replica reports master_link_status:up and,
// when it was started WithReplicaOf, its master lists it as online (only
// then does the master's WAIT count it), or until ctx ends.
func (s *Server) WaitSynced(ctx context.Context) error {
	for {
		st, err := s.Info("master_link_status")
		if err == nil && st == "up" && s.onlineAtMaster() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: replica %s not synced (status %q, last error %v): %w", s.Addr(), st, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitAcking waits until the master of s, a replica, has a write of its
// own acknowledged by a replica (WAIT 1): a replica's link may be up, and
// WaitSynced return, before the master streams writes to it.
func (s *Server) WaitAcking(ctx context.Context) error {
	s.mu.Lock()
	m := s.cfg.replica
	s.mu.Unlock()
	if m == nil {
		return fmt.Errorf("redistest: %s is not a replica", s.Addr())
	}
	for {
		if _, err := m.Do("SET", "redistest:probe", "1"); err != nil {
			return err
		}
		if n, _ := m.Do("WAIT", "1", "100"); n == "1" {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("redistest: no write of %s acknowledged by a replica: %w", m.Addr(), ctx.Err())
		}
	}
}

func (s *Server) onlineAtMaster() bool {
	s.mu.Lock()
	m := s.cfg.replica
	s.mu.Unlock()
	if m == nil {
		return true
	}
	out, err := m.Do("INFO", "replication")
	if err != nil {
		return false
	}
	want := "port=" + strconv.Itoa(s.port) + ",state=online"
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, want) {
			return true
		}
	}
	return false
}

var errBind = errors.New("address in use")

// clientTLS is the TLS configuration of the Server's own clients, nil
// when it speaks plain TCP.
func (s *Server) clientTLS() *tls.Config {
	if s.cfg.tls == nil {
		return nil
	}
	return s.cfg.tls.ClientConfig()
}

func (s *Server) args() []string {
	port := []string{"--port", strconv.Itoa(s.port)}
	if c := s.cfg.tls; c != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", c.ServerCertFile, "--tls-key-file", c.ServerKey,
			"--tls-ca-cert-file", c.CAFile, "--tls-auth-clients", string(s.cfg.tlsAuth),
			// Replication (and a Sentinel's every connection) goes over
			// TLS too, with the client certificate for a peer that
			// requires one.
			"--tls-replication", "yes",
			"--tls-client-cert-file", c.ClientCertFile, "--tls-client-key-file", c.ClientKey}
	}
	a := []string{
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--repl-diskless-sync-delay", "0",
		"--save", "",
	}
	a = append(port, a...)
	if s.cfg.conf != "" {
		a = append([]string{s.cfg.conf}, a...)
	}
	if s.cfg.aof {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if m := s.cfg.replica; m != nil {
		host, port := "127.0.0.1", strconv.Itoa(m.port)
		if s.cfg.via != "" {
			if h, p, err := net.SplitHostPort(s.cfg.via); err == nil {
				host, port = h, p
			}
		}
		a = append(a, "--replicaof", host, port)
		if m.cfg.password != "" {
			a = append(a, "--masterauth", m.cfg.password)
		}
		if m.cfg.user != "" {
			a = append(a, "--masteruser", m.cfg.user)
		}
	}
	switch {
	case s.cfg.user != "":
		a = append(a, "--user", "default", "off", "--user", s.cfg.user, "on", ">"+s.cfg.password, "~*", "&*", "+@all")
	case s.cfg.password != "":
		a = append(a, "--requirepass", s.cfg.password)
	}
	if s.bus != 0 {
		a = append(a, "--cluster-port", strconv.Itoa(s.bus))
	}
	return append(a, s.cfg.args...)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("redistest: server already cleaned up")
	}
	logPath := filepath.Join(s.dir, "redis.log")
	logStart := fileSize(logPath)
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.cfg.env...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		// Only our own process's answer counts: another's server may
		// have taken the port between FreePort and the bind (ours then
		// exits, "Address already in use"), and answer there until its
		// owner stops it.
		if pid, err := redisproc.ServerPID(s.Addr(), s.clientTLS(), s.cfg.user, s.cfg.password); err == nil && pid == cmd.Process.Pid {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			log := tail(logPath, logStart)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%w: %s", errBind, log)
			}
			return fmt.Errorf("%s exited: %s", s.bin, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.killLocked()
			return fmt.Errorf("no PONG within %v: %s", startTimeout, tail(logPath, logStart))
		}
	}
}

// killLocked kills the process, and waits for the children it forked (a
// BGSAVE or an AOF rewrite) to end by themselves: an orphaned child would
// otherwise go on writing into the directory, and rename a snapshot over
// the one a restart is about to load (or over a Wipe). The process is
// stopped first so that it cannot fork between the look at its children
// and its death.
func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	children := childPids(pid)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
	deadline := time.Now().Add(startTimeout)
	for _, c := range children {
		for alive(c) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// childPids lists the children of process pid, from every thread's
// /proc children file; nil where the kernel has none.
func childPids(pid int) []int {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	var out []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(w); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// alive reports whether process pid still runs: it exists and is not a
// zombie waiting for its new parent to reap it.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may hold
	// spaces: "pid (comm) S ...".
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: %v to %s: not running", sig, s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v to %s: %v", sig, s.Addr(), err)
	}
}

func (s *Server) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.killLocked()
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func tail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if from > int64(len(b)) {
		from = 0
	}
	b = b[from:]
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Keys returns the names of every key in s's database 0 (by SCAN, so a
// large keyspace does not block the server), in no particular order.
func (s *Server) Keys() ([]string, error) {
	c := s.doClient()
	ctx, cancel := context.WithTimeout(context.Background(), 4*startTimeout)
	defer cancel()
	var keys []string
	var cursor uint64
	for {
		page, next, err := c.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return nil, err
		}
		keys = append(keys, page...)
		if cursor = next; cursor == 0 {
			return keys, nil
		}
	}
}

// MemoryUsage returns the bytes key takes in s's memory (MEMORY USAGE with
// every element sampled), or 0 when the key does not exist.
func (s *Server) MemoryUsage(key string) (int64, error) {
	out, err := s.Do("MEMORY", "USAGE", key, "SAMPLES", "0")
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(out, 10, 64)
}

// UsedMemory returns the bytes the server has allocated (INFO memory's
// used_memory).
func (s *Server) UsedMemory() (int64, error) {
	v, err := s.Info("used_memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// Build is the server software a Server runs, as INFO server names it.
type Build struct {
	Name    string // "redis" or "valkey"
	Version string // the release of that software, "7.0.15" or "8.0.1"
}

// Build asks the server which software it runs: Valkey says so in
// server_name and gives its own release in valkey_version (its
// redis_version is the Redis release it is compatible with, 7.2.4 on
// 7.2.7 and 8.0.1); Redis has no server_name. Tests that depend on the
// server ask it this, rather than read the environment that chose it.
func (s *Server) Build() Build {
	s.t.Helper()
	out, err := s.Do("INFO", "server")
	if err != nil {
		s.t.Fatalf("redistest: INFO server on %s: %v", s.Addr(), err)
	}
	if field(out, "server_name") == "valkey" {
		return Build{Name: "valkey", Version: field(out, "valkey_version")}
	}
	return Build{Name: "redis", Version: field(out, "redis_version")}
}
