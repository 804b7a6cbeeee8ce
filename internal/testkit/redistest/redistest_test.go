package redistest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.ClientGoroutines()...) }

func TestStartDo(t *testing.T) {
	s := redistest.Start(t)
	if s.Port() == 0 || s.Pid() == 0 {
		t.Fatalf("port %d pid %d; want both set", s.Port(), s.Pid())
	}
	if got, err := s.Do("SET", "k", "v"); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v; want OK", got, err)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	if got, _ := s.Do("CONFIG", "GET", "appendonly"); got != "appendonly\nno" {
		t.Fatalf("appendonly = %q; want no", got)
	}
	if got, _ := s.Do("CONFIG", "GET", "save"); got != "save\n" {
		t.Fatalf("save = %q; want empty", got)
	}
}

func TestScriptStats(t *testing.T) {
	s := redistest.Start(t)
	if n, _, err := s.ScriptStats(); err != nil || n != 0 {
		t.Fatalf("fresh server: %d script calls, %v; want 0", n, err)
	}
	for range 3 {
		_, err := s.Do("EVAL", "return redis.call('SET', KEYS[1], '1')", "1", "k")
		require.NoError(t, err)
	}
	if n, usec, err := s.ScriptStats(); err != nil || n != 3 || usec <= 0 {
		t.Fatalf("after 3 EVALs: %d calls, %v µs, %v; want 3 calls and some time", n, usec, err)
	}
}

func TestStartN(t *testing.T) {
	ss := redistest.StartN(t, 3)
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s.Addr()] {
			t.Fatalf("address %s used twice", s.Addr())
		}
		seen[s.Addr()] = true
		if _, err := s.Do("PING"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKillRestartWithoutAOFLosesData(t *testing.T) {
	s := redistest.Start(t)
	s.MustDo(t, "SET", "k", "v")
	port := s.Port()
	s.Kill()
	if s.Pid() != 0 {
		t.Fatalf("pid after Kill = %d; want 0", s.Pid())
	}
	s.Restart()
	if s.Port() != port {
		t.Fatalf("port after Restart = %d; want %d", s.Port(), port)
	}
	if _, err := s.Do("GET", "k"); !isNil(err) {
		t.Fatalf("GET after restart: err = %v; want nil reply", err)
	}
}

func TestKillRestartWithAOFKeepsData(t *testing.T) {
	s := redistest.Start(t, redistest.WithAOF())
	s.MustDo(t, "SET", "k", "v")
	s.Kill()
	s.Restart()
	if got, err := s.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET after restart = %q, %v; want v", got, err)
	}
}

func TestPauseResume(t *testing.T) {
	s := redistest.Start(t)
	s.MustDo(t, "PING")
	s.Pause()
	done := make(chan error, 1)
	go func() {
		_, err := s.Do("PING")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("PING answered while paused (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	s.Resume()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("PING after resume: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("PING not answered after resume")
	}
}

func TestReplica(t *testing.T) {
	m := redistest.Start(t)
	r := redistest.Start(t, redistest.WithReplicaOf(m))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.MustDo(t, "INFO", "replication"); !strings.Contains(got, "state=online") {
		t.Fatalf("master does not list the replica online after WaitSynced:\n%s", got)
	}
	m.MustDo(t, "SET", "k", "v")
	deadline := time.Now().Add(5 * time.Second)
	for got, _ := r.Do("GET", "k"); got != "v"; got, _ = r.Do("GET", "k") {
		if time.Now().After(deadline) {
			t.Fatal("write on the master never reached the replica")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestArgsAndEnv(t *testing.T) {
	s := redistest.Start(t, redistest.WithArgs("--maxmemory", "12345678"), redistest.WithEnv("DLOCK_TEST=1"))
	if got := s.MustDo(t, "CONFIG", "GET", "maxmemory"); got != "maxmemory\n12345678" {
		t.Fatalf("maxmemory = %q", got)
	}
}

func TestCleanupKills(t *testing.T) {
	var pid int
	t.Run("inner", func(t *testing.T) {
		pid = redistest.Start(t).Pid()
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d after cleanup: %v; want ESRCH", pid, err)
	}
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// A snapshot still being written when the server is killed may be
// finished by the orphaned child (Redis's child gives up only when it next
// reports to its dead parent): Kill returns only once that child is gone,
// so the snapshot in the directory no longer changes, and a restart loads
// what is there rather than racing the child's rename.
func TestKillWaitsForSnapshot(t *testing.T) {
	s := redistest.Start(t, redistest.WithArgs("--enable-debug-command", "yes", "--save", "3600 1"))
	s.MustDo(t, "DEBUG", "POPULATE", "300000", "k", "64")
	s.MustDo(t, "BGSAVE")
	s.Kill()
	dump := filepath.Join(s.Dir(), "dump.rdb")
	before, errBefore := os.Stat(dump)
	time.Sleep(time.Second)
	after, errAfter := os.Stat(dump)
	if (errBefore == nil) != (errAfter == nil) || (errBefore == nil && (before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()))) {
		t.Fatalf("dump.rdb changed after Kill returned: %v, %v then %v, %v", before, errBefore, after, errAfter)
	}
	require.NoError(t, s.StartAgain())
	want := "0"
	if errBefore == nil {
		want = "300000"
	}
	if got := s.MustDo(t, "DBSIZE"); got != want {
		t.Fatalf("DBSIZE after a restart = %s; want %s (snapshot there: %t)", got, want, errBefore == nil)
	}
}

func TestWipe(t *testing.T) {
	s := redistest.Start(t, redistest.WithArgs("--save", "3600 1", "--appendonly", "yes", "--appendfsync", "everysec"))
	s.MustDo(t, "SET", "k", "v")
	s.MustDo(t, "SAVE")
	if err := s.Wipe(); err == nil {
		t.Fatal("Wipe of a running server succeeded; want an error")
	}
	s.Kill()
	if err := s.Wipe(); err != nil {
		t.Fatal(err)
	}
	require.NoError(t, s.StartAgain())
	if got := s.MustDo(t, "DBSIZE"); got != "0" {
		t.Fatalf("DBSIZE after Wipe and restart = %s; want 0", got)
	}
}

func TestSignal(t *testing.T) {
	s := redistest.Start(t)
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	s.MustDo(t, "PING")
	s.Kill()
	if s.Running() {
		t.Fatal("Running() after Kill = true")
	}
	if err := s.Signal(syscall.SIGCONT); err == nil {
		t.Fatal("Signal to a killed server succeeded; want an error")
	}
}

// A replica dialling its master through a proxy follows the master the
// proxy forwards to, and SetReplicaOf turns a promoted replica's later
// restarts into a master's, and the old master's into a replica's.
func TestReplicaViaProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m := redistest.Start(t)
	p := redistest.StartProxy(t, m.Addr())
	r := redistest.Start(t, redistest.WithReplicaOf(m), redistest.WithReplicaVia(p.Addr()))
	require.NoError(t, r.WaitSynced(ctx))
	m.MustDo(t, "SET", "k", "1")
	waitFor(t, r, "k", "1")

	// Failover: r takes over, m comes back as its replica through p.
	m.Kill()
	r.MustDo(t, "REPLICAOF", "NO", "ONE")
	r.SetReplicaOf(nil, "")
	require.NoError(t, p.SetUpstream(r.Addr()))
	if p.Upstream() != r.Addr() {
		t.Fatalf("Upstream() = %s; want %s", p.Upstream(), r.Addr())
	}
	m.SetReplicaOf(r, p.Addr())
	require.NoError(t, m.StartAgain())
	require.NoError(t, m.WaitSynced(ctx))
	r.MustDo(t, "SET", "k", "2")
	waitFor(t, m, "k", "2")
	require.NoError(t, r.StartAgain())
	if role := r.MustDo(t, "ROLE"); !strings.HasPrefix(role, "master") {
		t.Fatalf("ROLE of the promoted replica after a restart = %q; want master", role)
	}
}

func waitFor(t *testing.T, s *redistest.Server, key, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for got, _ := s.Do("GET", key); got != want; got, _ = s.Do("GET", key) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %q on %s", key, want, s.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
