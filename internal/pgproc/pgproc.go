// Package pgproc starts and stops a PostgreSQL server of its own: Debian's
// package (the newest release under /usr/lib/postgresql, or initdb and
// postgres on PATH), initdb in a new temporary folder, the server on a
// free loopback port, stopped by pid, the folder removed. The tests'
// servers (internal/testkit/pgtest) and the demo (cmd/dlock) share it.
//
// PostgreSQL refuses to run as root. Run as root, initdb and the server
// run as the postgres user the package creates, on a folder that user
// owns; run as anyone else, as that user.
package pgproc

import (
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
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql

	"github.com/dlockgo/dlock/internal/redisproc"
)

// startTimeout bounds initdb and the wait for the server to answer:
// generous, for a machine busy with a soak's servers.
const startTimeout = 60 * time.Second

// superuser is the role initdb creates, trusted on loopback.
const superuser = "dlock"

// ErrNotInstalled is what Start's error matches when no PostgreSQL is
// installed.
var ErrNotInstalled = errors.New("PostgreSQL is not installed")

// ErrStopped is what Admin returns once the server was stopped.
var ErrStopped = errors.New("pgproc: the server was stopped")

// Server is one PostgreSQL server process.
type Server struct {
	dir  string // the temporary folder: data/, the socket and the log
	port int
	cmd  *exec.Cmd

	exited chan struct{} // closed when the process has been waited for
	admin  *sql.DB       // the postgres database, for CREATE DATABASE

	mu      sync.Mutex
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
			return nil, fmt.Errorf("pgproc: %s for the postgres user: %w", dir, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", s.data(),
		"-A", "trust", "-U", superuser, "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgproc: initdb: %w\n%s", err, out)
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
	// Durability is of no use to throwaway data; fewer
	// connections and buffers keep the server light beside other work.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", s.data(),
		"-p", strconv.Itoa(s.port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=60", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with this process, however that ends. Pdeathsig
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
		return fmt.Errorf("pgproc: start postgres: %w", err)
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
			return fmt.Errorf("pgproc: postgres exited at start:\n%s", log)
		case <-ctx.Done():
			db.Close()
			return fmt.Errorf("pgproc: postgres on port %d did not answer within %v: %v", s.port, startTimeout, last)
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

// Admin runs stmt (CREATE DATABASE and the like) on the server's postgres
// database; once Stop was called it returns ErrStopped and runs nothing.
func (s *Server) Admin(ctx context.Context, stmt string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	_, err := s.admin.ExecContext(ctx, stmt)
	return err
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

// BinEnv names the environment variable that, when set, is the folder
// of initdb and postgres, wherever PostgreSQL is installed; one without
// them means none is.
const BinEnv = "DLOCK_PG_BIN"

// binDir returns the folder of initdb and postgres: BinEnv's, else the
// newest release under /usr/lib/postgresql (Debian keeps them off PATH),
// else the folder of initdb on PATH.
func binDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			return "", fmt.Errorf("pgproc: no initdb in %s=%s: %w", BinEnv, dir, ErrNotInstalled)
		}
		return dir, nil
	}
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
		return "", fmt.Errorf("pgproc: no PostgreSQL: neither /usr/lib/postgresql/*/bin/initdb nor initdb on PATH (Debian's postgresql package): %w", ErrNotInstalled)
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
		return nil, fmt.Errorf("pgproc: PostgreSQL refuses to run as root, and there is no postgres user to run it as (Debian's postgresql package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgproc: the postgres user's ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
