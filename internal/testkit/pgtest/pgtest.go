// Package pgtest starts a real PostgreSQL server for tests: Debian's
// package (the newest release under /usr/lib/postgresql, or initdb and
// postgres on PATH), on a free loopback port, in a temporary folder of its
// own, stopped by pid. A test binary shares one server (Shared, stopped
// by Main) and each test gets a new database on it (DB), so that starting
// PostgreSQL costs a second per binary, not per test.
//
// PostgreSQL refuses to run as root. Run as root (the suite on a fresh
// machine is), initdb and the server run as the postgres user the package
// creates, on a folder that user owns; run as anyone else, as that user.
// There is no skip: a test that asks for a server fails when none starts.
package pgtest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql

	"github.com/dlockgo/dlock/internal/redisproc"
)

// startTimeout bounds initdb and the wait for the server to answer:
// generous, for a machine busy with a soak's servers.
const startTimeout = 60 * time.Second

// superuser is the role initdb creates, trusted on loopback.
const superuser = "dlock"

// Server is one PostgreSQL server process.
type Server struct {
	dir  string // the temporary folder: data/, the socket and the log
	port int
	cmd  *exec.Cmd

	exited chan struct{} // closed when the process has been waited for
	admin  *sql.DB       // the postgres database, for CREATE DATABASE

	mu      sync.Mutex
	made    int
	stopped bool
}

// Start runs initdb in a new temporary folder and starts a server on it;
// it returns once the server answers on its port. Stop ends it.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dlock-pg")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %s for the postgres user: %w", dir, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", s.data(),
		"-A", "trust", "-U", superuser, "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	for range 5 {
		if s.port, err = redisproc.FreePort(); err != nil {
			break
		}
		if err = s.start(ctx, bin, cred); !errors.Is(err, errBind) {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

var errBind = errors.New("address in use")

// start starts the server on s.port and waits until it answers there.
func (s *Server) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// Durability is of no use to a test's throwaway data; fewer
	// connections and buffers keep the server light beside other tests.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", s.data(),
		"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=60", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test binary, however that ends. Pdeathsig
	// follows the thread that started the process, not the process: the
	// goroutine below keeps its thread until the server has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	s.cmd, s.exited = cmd, make(chan struct{})
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	if err := s.wait(ctx); err != nil {
		s.kill()
		return err
	}
	return nil
}

// wait waits until the server answers on its port, as this server: the
// data folder it reports is s's own, not another process's that took the
// port.
func (s *Server) wait(ctx context.Context) error {
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		return err
	}
	var last error
	for {
		select {
		case <-s.exited:
			db.Close()
			log, _ := os.ReadFile(s.logPath())
			if strings.Contains(string(log), "could not bind") || strings.Contains(string(log), "already in use") {
				return errBind
			}
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", log)
		case <-ctx.Done():
			db.Close()
			return fmt.Errorf("pgtest: postgres on port %d did not answer within %v: %v", s.port, startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
		var data string
		last = db.QueryRowContext(ctx, "SELECT current_setting('data_directory')").Scan(&data)
		if last == nil && data != s.data() {
			last = fmt.Errorf("another server answers on port %d (data in %s)", s.port, data)
		}
		if last == nil {
			s.admin = db
			return nil
		}
	}
}

// Port returns the loopback port the server listens on.
func (s *Server) Port() int { return s.port }

// Pid returns the server's (the postmaster's) process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Dir returns the server's temporary folder: the data in data/, its log
// in postgres.log. Stop removes it.
func (s *Server) Dir() string { return s.dir }

// DSN returns the URL of database on s, for the pgx driver or any
// driver that reads PostgreSQL URLs.
func (s *Server) DSN(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User(superuser),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + database,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// NewDB creates a database on s for t alone and opens it with the pgx
// driver; it is closed and dropped when t ends (unless s was stopped
// before). It fails t on an error.
func (s *Server) NewDB(t testing.TB) *sql.DB {
	t.Helper()
	s.mu.Lock()
	s.made++
	name := "test_" + strconv.Itoa(s.made)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	db, err := sql.Open("pgx", s.DSN(name))
	if err != nil {
		t.Fatalf("pgtest: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped {
			return // with the server's folder
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return db
}

// Stop ends the server by its pid (a fast shutdown, SIGINT; SIGKILL if it
// has not exited within 10 s), waits until it is gone and removes its
// folder. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.admin != nil {
		s.admin.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	return os.RemoveAll(s.dir)
}

// kill ends the process with SIGKILL and waits until it is gone.
func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *Server) data() string    { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// binDir returns the folder of initdb and postgres: the newest release
// under /usr/lib/postgresql (Debian keeps them off PATH), else the folder
// of initdb on PATH.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	version := func(p string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return v
	}
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1]), nil
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("pgtest: no PostgreSQL: neither /usr/lib/postgresql/*/bin/initdb nor initdb on PATH (./scripts/test.sh installs Debian's postgresql)")
	}
	return filepath.Dir(p), nil
}

// credential returns the postgres user's, for a root process, and nil
// for anyone else (who runs PostgreSQL as themselves).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: PostgreSQL refuses to run as root, and there is no postgres user to run it as (Debian's postgresql package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: the postgres user's ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// TestingM is what a TestMain runs: *testing.M.
type TestingM interface{ Run() int }

// shared is the test binary's server, started by the first Shared.
var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Main returns m, which stops the shared server (if a test started it)
// once m's tests have run: os.Exit(pgtest.Main(m).Run()), or
// goleak.VerifyTestMain(pgtest.Main(m)).
func Main(m TestingM) TestingM { return stopAfter{m} }

type stopAfter struct{ m TestingM }

func (r stopAfter) Run() int {
	code := r.m.Run()
	if shared.s != nil {
		if err := shared.s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			return cmp.Or(code, 1)
		}
	}
	return code
}

// URLEnv names the environment variable ForExamples sets: the URL of a
// database for a package's runnable examples, which read it as a reader
// running them would set it.
const URLEnv = "DLOCK_PG_URL"

// ForExamples is Main that first starts the shared server and names a new
// database on it in URLEnv, for the package's runnable examples; a server
// that does not start fails the binary.
func ForExamples(m TestingM) TestingM { return examples{m} }

type examples struct{ m TestingM }

func (r examples) Run() int {
	shared.once.Do(func() { shared.s, shared.err = Start() })
	if shared.err != nil {
		fmt.Fprintln(os.Stderr, shared.err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := shared.s.admin.ExecContext(ctx, "CREATE DATABASE examples"); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: the examples' database:", err)
		_ = shared.s.Stop()
		return 1
	}
	os.Setenv(URLEnv, shared.s.DSN("examples"))
	return stopAfter(r).Run()
}

// Shared returns the test binary's server, started by the first call (the
// others wait for it); the binary's TestMain stops it through Main. It
// fails t when the server cannot start.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.s, shared.err = Start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// DB returns a new database on the shared server, for t alone (NewDB).
func DB(t testing.TB) *sql.DB {
	t.Helper()
	return Shared(t).NewDB(t)
}
