package pgtest_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// Each test's database is its own: a table made in one is absent from
// another, on the one shared server.
func TestDB(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.DB(t), pgtest.DB(t)
	if _, err := a.ExecContext(ctx, "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRowContext(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the table in b: count %d, %v; want 0, nil", n, err)
	}
	if s1, s2 := pgtest.Shared(t), pgtest.Shared(t); s1 != s2 {
		t.Fatalf("two shared servers: %p, %p", s1, s2)
	}
}

// A server of its own runs as a user other than root, and Stop ends it by
// its pid and removes its folder.
func TestStartStop(t *testing.T) {
	s, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if uid := processUID(t, s.Pid()); uid == 0 {
		t.Errorf("the server runs as root")
	}
	db := pgtest.NewDB(t, s)
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	db.Close()
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Stop, kill(%d, 0) = %v; want ESRCH", pid, err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop, the folder %s: %v; want it gone", s.Dir(), err)
	}
	if err := db.PingContext(ctx(t)); err == nil {
		t.Error("a ping after Stop succeeded")
	}
}

// processUID reads the real uid of process pid from /proc.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return 0
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}
