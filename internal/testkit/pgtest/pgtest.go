// Package pgtest gives tests a real PostgreSQL server (internal/pgproc:
// Debian's package, on a free loopback port, in a temporary folder of its
// own, stopped by pid). A test binary shares one server (Shared, stopped
// by Main) and each test gets a new database on it (DB), so that starting
// PostgreSQL costs a second per binary, not per test.
//
// There is no skip: a test that asks for a server fails when none starts.
package pgtest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/pgproc"
)

// Server is one PostgreSQL server process.
type Server = pgproc.Server

// Start starts a server of its own (pgproc.Start); Stop ends it.
func Start() (*Server, error) { return pgproc.Start() }

// adminTimeout bounds a CREATE or DROP DATABASE: generous, for a machine
// busy with a soak's servers.
const adminTimeout = 60 * time.Second

// made numbers the databases NewDB creates.
var made atomic.Int64

// NewDB creates a database on s for t alone and opens it with the pgx
// driver; it is closed and dropped when t ends (unless s was stopped
// before). It fails t on an error.
func NewDB(t testing.TB, s *Server) *sql.DB {
	t.Helper()
	name := "test_" + strconv.FormatInt(made.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.Admin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	db, err := sql.Open("pgx", s.DSN(name))
	if err != nil {
		t.Fatalf("pgtest: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		// A stopped server went with its folder.
		if err := s.Admin(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil && !errors.Is(err, pgproc.ErrStopped) {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return db
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
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := shared.s.Admin(ctx, "CREATE DATABASE examples"); err != nil {
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
	return NewDB(t, Shared(t))
}
