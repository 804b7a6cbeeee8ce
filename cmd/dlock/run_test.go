package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

func urlOf(srvs ...*redistest.Server) string {
	if len(srvs) == 1 {
		return "redis://" + srvs[0].Addr()
	}
	addrs := make([]string, len(srvs))
	for i, s := range srvs {
		addrs[i] = s.Addr()
	}
	return "quorum://" + strings.Join(addrs, ",")
}

func TestRunExitCode(t *testing.T) {
	t.Parallel()
	url := urlOf(redistest.Start(t))
	// A script without its execute bit exists but cannot be started, by
	// root too.
	noExec := filepath.Join(t.TempDir(), "no-exec.sh")
	require.NoError(t, os.WriteFile(noExec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"sh", "-c", "kill -9 $$"}, 128 + 9},
		{[]string{"/nonexistent/cmd"}, exitNotFound},
		{[]string{noExec}, exitCannotExec},
		{[]string{t.TempDir()}, exitCannotExec},
	} {
		for _, client := range []string{"go-redis", "valkey-go"} {
			r := runBin(t, nil, append([]string{"run", "--url", url, "--client", client, "--key", "exit", "--"}, tc.argv...)...)
			if r.code != tc.want {
				t.Errorf("run %v (%s): got %v; want exit %d", tc.argv, client, r, tc.want)
			}
		}
	}
	// Every run released the lock.
	if r := runBin(t, nil, "inspect", "--url", url, "exit"); r.code != exitNotHeld {
		t.Errorf("inspect after the runs: got %v; want exit %d (free)", r, exitNotHeld)
	}
}

func TestRunEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// Tokens are floored at the server's clock in µs: only their order is
	// checked, each run's above the one before.
	var last uint64
	for _, env := range [][]string{{"DLOCK_URL=" + urlOf(srv)}, nil} {
		args := []string{"run", "--key", "env", "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_TOKEN"`}
		if env == nil {
			args = append([]string{"run", "--url", urlOf(srv)}, args[1:]...)
		}
		r := runBin(t, env, args...)
		key, tok, _ := strings.Cut(strings.TrimSuffix(r.stdout, "\n"), " ")
		n, err := strconv.ParseUint(tok, 10, 64)
		if r.code != 0 || key != "env" || err != nil || n <= last {
			t.Errorf("got %v; want exit 0 and \"env <token>\" with a token above %d", r, last)
		}
		last = n
	}
}

func TestRunQuorum(t *testing.T) {
	t.Parallel()
	url := urlOf(redistest.StartN(t, 3)...)
	// Fresh nodes sit out one max TTL (here the 1s TTL) before they vote.
	r := runBin(t, nil, "run", "--url", url, "--ttl", "1s", "--wait", "10s", "--key", "q", "--",
		"sh", "-c", `echo "$DLOCK_TOKEN"; exit 3`)
	tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
	if r.code != 3 || err != nil || tok < 1e15 {
		t.Errorf("got %v; want exit 3 and a quorum token (server µs)", r)
	}
}

// TestRunNoOverlap runs several dlock run of one key at once; each child
// appends start and end lines to one file, which must never interleave.
func TestRunNoOverlap(t *testing.T) {
	t.Parallel()
	url := urlOf(redistest.Start(t))
	file := filepath.Join(t.TempDir(), "log")
	const n = 5
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = runBin(t, nil, "run", "--url", url, "--key", "overlap", "--wait", "30s", "--",
				"sh", "-c", fmt.Sprintf(`echo "start %d" >> %s; sleep 0.2; echo "end %d" >> %s`, i, file, i, file))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("run %d: %v", i, r)
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("got %d lines; want %d:\n%s", len(lines), 2*n, b)
	}
	for i := 0; i < len(lines); i += 2 {
		id, ok := strings.CutPrefix(lines[i], "start ")
		if !ok || lines[i+1] != "end "+id {
			t.Fatalf("runs overlapped at line %d:\n%s", i+1, b)
		}
	}
}

func TestRunTaken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := urlOf(srv)
	holder := command(nil, "run", "--url", url, "--key", "taken", "--", "sleep", "3")
	var hout, herr bytes.Buffer
	holder.Stdout, holder.Stderr = &hout, &herr
	require.NoError(t, holder.Start())
	waitFor(t, "the holder's lock", func() bool {
		out, _ := srv.LockField("dlock:{taken}", "owner")
		return out != ""
	})
	for _, wait := range []string{"0", "300ms"} {
		r := runBin(t, nil, "run", "--url", url, "--key", "taken", "--wait", wait, "--", "true")
		if r.code != exitTaken || !strings.Contains(r.stderr, "taken") && !strings.Contains(r.stderr, "held elsewhere") {
			t.Errorf("--wait %s: got %v; want exit %d", wait, r, exitTaken)
		}
	}
	r := runBin(t, nil, "inspect", "--url", url, "taken")
	if r.code != 0 || !strings.Contains(r.stdout, "held") || !regexp.MustCompile(`(?m)^token +[1-9][0-9]*$`).MatchString(r.stdout) {
		t.Errorf("inspect: got %v; want held, with a token", r)
	}
	if hr := wait(t, holder, &hout, &herr); hr.code != 0 {
		t.Errorf("holder: %v", hr)
	}
}

// TestRunLost takes the lock away behind a running command's back: dlock
// must stop the command (SIGKILL when it ignores SIGTERM) and exit 76.
func TestRunLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		steal  []string
	}{
		{"deleted", `echo $$ > %s; exec sleep 30`, []string{"DEL", "dlock:{lost-deleted}"}},
		{"taken over, TERM ignored", `trap "" TERM; echo $$ > %s; while :; do sleep 0.1; done`,
			redistest.StealArgs("dlock:{lost-taken over, TERM ignored}", "someone-else")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			cmd := command(nil, "run", "--url", urlOf(srv), "--key", "lost-"+tc.name, "--ttl", "1s", "--grace", "300ms",
				"--", "sh", "-c", fmt.Sprintf(tc.script, pidFile))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			var pid int
			waitFor(t, "the child's pid", func() bool {
				b, _ := os.ReadFile(pidFile)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return pid > 0
			})
			_, err := srv.Do(tc.steal...)
			require.NoError(t, err)
			start := time.Now()
			r := wait(t, cmd, &stdout, &stderr)
			if r.code != exitLost || !strings.Contains(r.stderr, "lease lost") {
				t.Errorf("got %v; want exit %d and the lost lease reported", r, exitLost)
			}
			// Renewal at a third of the TTL notices; the grace bounds the rest.
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("dlock exited %v after the lock was taken; want within about a TTL plus the grace", d)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Errorf("child %d still runs after dlock exited", pid)
			}
		})
	}
}

// TestRunSignal sends SIGTERM to dlock: the child gets it and its exit
// code comes back.
func TestRunSignal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	cmd := command(nil, "run", "--url", urlOf(srv), "--key", "signal", "--",
		"sh", "-c", fmt.Sprintf(`trap "exit 9" TERM; touch %s; while :; do sleep 0.05; done`, ready))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	waitFor(t, "the child", func() bool { _, err := os.Stat(ready); return err == nil })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if r := wait(t, cmd, &stdout, &stderr); r.code != 9 {
		t.Errorf("got %v; want the child's exit 9", r)
	}
	if out, _ := srv.LockField("dlock:{signal}", "owner"); out != "" {
		t.Errorf("lock still held after the child exited")
	}
}

func TestRunUsageAndUnavailable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dead := redistest.Start(t)
	dead.Kill()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "--url", urlOf(srv), "--", "true"}, exitUsage}, // no key
		{[]string{"run", "--url", urlOf(srv), "--key", "k"}, exitUsage}, // no command
		{[]string{"run", "--url", urlOf(srv), "--client", "x", "--key", "k", "--", "true"}, exitUsage},
		{[]string{"run", "--url", "http://x", "--key", "k", "--", "true"}, exitUsage},
		{[]string{"run", "--url", urlOf(srv), "--addrs", srv.Addr(), "--key", "k", "--", "true"}, exitUsage},
		{[]string{"run", "--bogus"}, exitUsage},
		{[]string{"nope"}, exitUsage},
		{[]string{"run", "--url", urlOf(dead), "--key", "k", "--", "true"}, exitUnavailable},
		{[]string{"inspect", "--url", urlOf(dead), "k"}, exitUnavailable},
		{[]string{"run", "--help"}, exitOK},
	} {
		if r := runBin(t, nil, tc.args...); r.code != tc.want {
			t.Errorf("dlock %v: got %v; want exit %d", tc.args, r, tc.want)
		}
	}
}

// TestRunWaitOutage: a wait whose servers die under it is an outage (69),
// not a lock held elsewhere (75), so that `|| [ $? -eq 75 ]` does not hide
// it. The same wait while the servers answer still exits 75.
func TestRunWaitOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int // servers; a majority of them is killed
	}{
		{"single", 1},
		{"quorum", 3},
	} {
		for _, client := range redistest.Clients {
			t.Run(tc.name+"/"+client, func(t *testing.T) {
				t.Parallel()
				testRunWaitOutage(t, tc.n, client, "outage-"+tc.name)
			})
		}
	}
}

func testRunWaitOutage(t *testing.T, n int, client, key string) {
	srvs := redistest.StartN(t, n)
	url := urlOf(srvs...) + "?client=" + client
	// A 1s TTL: the quorum's fresh nodes sit out one TTL, and the
	// holder gives up soon after its servers die.
	ready := filepath.Join(t.TempDir(), "ready")
	holder := command(nil, "run", "--url", url, "--key", key, "--ttl", "1s", "--wait", "10s", "--",
		"sh", "-c", "touch "+ready+"; exec sleep 30")
	var hout, herr bytes.Buffer
	holder.Stdout, holder.Stderr = &hout, &herr
	require.NoError(t, holder.Start())
	waitFor(t, "the holder's lock", func() bool { _, err := os.Stat(ready); return err == nil })

	r := runBin(t, nil, "run", "--url", url, "--key", key, "--ttl", "1s", "--wait", "500ms", "--", "true")
	if r.code != exitTaken {
		t.Errorf("--wait 500ms on a held lock: got %v; want exit %d", r, exitTaken)
	}

	waiter := command(nil, "run", "--url", url, "--key", key, "--ttl", "1s", "--wait", "3s", "--", "true")
	var wout, werr bytes.Buffer
	waiter.Stdout, waiter.Stderr = &wout, &werr
	require.NoError(t, waiter.Start())
	waitFor(t, "the waiter in the queue", func() bool { return queued(srvs[0], key) })
	for _, s := range srvs[:n/2+1] {
		s.Kill()
	}
	if r := wait(t, waiter, &wout, &werr); r.code != exitUnavailable {
		t.Errorf("--wait 3s, servers killed during the wait: got %v; want exit %d", r, exitUnavailable)
	}
	if hr := wait(t, holder, &hout, &herr); hr.code != exitLost {
		t.Errorf("holder, its servers killed: got %v; want exit %d", hr, exitLost)
	}
}

// queued reports whether a waiter holds a ticket in key's queue on srv,
// under either strategy's key layout.
func queued(srv *redistest.Server, key string) bool {
	for _, q := range []string{"dlock:{" + key + "}:q", "dlock:{" + key + "}:queue"} {
		if out, _ := srv.Do("ZCARD", q); out != "" && out != "0" {
			return true
		}
	}
	return false
}

// TestRunPermits runs several dlock run --permits 2 of one key at once:
// no more than two children run at a time, each in a slot of its own; a
// third that will not wait is told the permits are taken; a quorum or a
// bad count is a usage error.
func TestRunPermits(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	url := urlOf(srvs[0])
	file := filepath.Join(t.TempDir(), "log")
	const n = 6
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = runBin(t, nil, "run", "--url", url, "--permits", "2", "--key", "pool", "--wait", "30s", "--",
				"sh", "-c", fmt.Sprintf(`echo "start $DLOCK_SLOT" >> %s; sleep 0.3; echo "end $DLOCK_SLOT" >> %s`, file, file))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("run %d: %v", i, r)
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("got %d lines; want %d:\n%s", len(lines), 2*n, b)
	}
	busy := map[string]bool{}
	for i, l := range lines {
		what, slot, _ := strings.Cut(l, " ")
		if slot != "0" && slot != "1" {
			t.Fatalf("line %d: slot %q; want 0 or 1:\n%s", i+1, slot, b)
		}
		switch what {
		case "start":
			if busy[slot] || len(busy) == 2 {
				t.Fatalf("line %d: a child started in slot %s while %v ran:\n%s", i+1, slot, busy, b)
			}
			busy[slot] = true
		case "end":
			delete(busy, slot)
		}
	}

	holders := make([]*exec.Cmd, 2)
	for i := range holders {
		holders[i] = command(nil, "run", "--url", url, "--permits", "2", "--key", "full", "--", "sleep", "3")
		require.NoError(t, holders[i].Start())
	}
	waitFor(t, "two permits held", func() bool {
		r := runBin(t, nil, "run", "--url", url, "--permits", "2", "--key", "full", "--wait", "0", "--", "true")
		return r.code == exitTaken
	})
	for _, h := range holders {
		_ = h.Wait()
	}

	for _, tc := range [][]string{
		{"run", "--url", urlOf(srvs...), "--permits", "2", "--key", "q", "--", "true"},
		{"run", "--url", url, "--permits", "-1", "--key", "q", "--", "true"},
	} {
		if r := runBin(t, nil, tc...); r.code != exitUsage || !strings.Contains(r.stderr, "--permits") {
			t.Errorf("%v: got %v; want exit %d naming --permits", tc, r, exitUsage)
		}
	}
}

// TestRunShared: --shared readers of one key hold it together (each waits
// until all have started, which it could not if they excluded one
// another), share a token above the writer's before them, and keep an
// --exclusive writer out; a writer keeps a reader out. The flags need the
// single strategy and exclude each other and --permits.
func TestRunShared(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	url := urlOf(srvs[0])
	dir := t.TempDir()
	log := filepath.Join(dir, "log")

	w := runBin(t, nil, "run", "--url", url, "--exclusive", "--key", "catalog", "--", "sh", "-c", `echo "$DLOCK_TOKEN" > `+filepath.Join(dir, "writer"))
	require.Equal(t, 0, w.code, "writer: %v", w)
	wtok, err := os.ReadFile(filepath.Join(dir, "writer"))
	require.NoError(t, err)

	const readers = 3
	gate := filepath.Join(dir, "go")
	cmds := make([]*exec.Cmd, readers)
	for i := range cmds {
		cmds[i] = command(nil, "run", "--url", url, "--shared", "--key", "catalog", "--", "sh", "-c",
			fmt.Sprintf(`echo "start $DLOCK_TOKEN" >> %s; while [ ! -e %s ]; do sleep 0.02; done`, log, gate))
		require.NoError(t, cmds[i].Start())
	}
	waitFor(t, "every reader holding at once", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "start ") == readers
	})
	if r := runBin(t, nil, "run", "--url", url, "--exclusive", "--key", "catalog", "--wait", "0", "--", "true"); r.code != exitTaken {
		t.Errorf("writer while %d readers hold: %v; want exit %d", readers, r, exitTaken)
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("reader %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	wt, err := strconv.ParseUint(strings.TrimSpace(string(wtok)), 10, 64)
	require.NoError(t, err, "the writer's DLOCK_TOKEN")
	var first string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		tok := strings.TrimPrefix(l, "start ")
		if first == "" {
			first = tok
		}
		if rt, err := strconv.ParseUint(tok, 10, 64); err != nil || rt <= wt || tok != first {
			t.Errorf("a reader's DLOCK_TOKEN %s; want one token for the readers (%s), above the writer's before them, %d", tok, first, wt)
		}
	}

	gate2 := filepath.Join(dir, "go2")
	holder := command(nil, "run", "--url", url, "--exclusive", "--key", "catalog", "--", "sh", "-c",
		fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.02; done`, filepath.Join(dir, "writing"), gate2))
	require.NoError(t, holder.Start())
	waitFor(t, "the writer holding", func() bool { _, err := os.Stat(filepath.Join(dir, "writing")); return err == nil })
	if r := runBin(t, nil, "run", "--url", url, "--shared", "--key", "catalog", "--wait", "0", "--", "true"); r.code != exitTaken {
		t.Errorf("reader while a writer holds: %v; want exit %d", r, exitTaken)
	}
	require.NoError(t, os.WriteFile(gate2, nil, 0o644))
	require.NoError(t, holder.Wait())

	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"run", "--url", urlOf(srvs...), "--shared", "--key", "q", "--", "true"}, "--shared"},
		{[]string{"run", "--url", url, "--shared", "--exclusive", "--key", "q", "--", "true"}, "--exclusive"},
		{[]string{"run", "--url", url, "--shared", "--permits", "2", "--key", "q", "--", "true"}, "--permits"},
	} {
		if r := runBin(t, nil, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.name) {
			t.Errorf("%v: got %v; want exit %d naming %s", tc.args, r, exitUsage, tc.name)
		}
	}
}

// TestRunKeys: --keys holds every key at once. Two runs over {a, b} and
// {b, a} never run together (each writes while it holds both, and the log
// shows no start between another's start and end), a lock on b alone is
// refused while a run holds the set, CMD gets each key's token, and the
// flag's rules are checked.
func TestRunKeys(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	url := urlOf(srvs[0])
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	const runs = 6
	var wg sync.WaitGroup
	results := make([]result, runs)
	for i := range runs {
		keys := "acct:1,acct:2"
		if i%2 == 1 {
			keys = "acct:2,acct:1"
		}
		wg.Go(func() {
			results[i] = runBin(t, nil, "run", "--url", url, "--keys", keys, "--wait", "30s", "--",
				"sh", "-c", fmt.Sprintf(`echo "start $DLOCK_KEYS $DLOCK_TOKENS" >> %s; sleep 0.2; echo "end" >> %s`, log, log))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("run %d: %v", i, r)
		}
	}
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*runs {
		t.Fatalf("got %d lines; want %d:\n%s", len(lines), 2*runs, b)
	}
	for i, l := range lines {
		want := "start"
		if i%2 == 1 {
			want = "end"
		}
		if !strings.HasPrefix(l, want) {
			t.Fatalf("line %d: %q; want %s (runs over shared keys overlapped):\n%s", i+1, l, want, b)
		}
		if want == "start" {
			f := strings.Fields(l)
			if len(f) != 3 || len(strings.Split(f[2], ",")) != 2 || strings.Contains(f[2], ",,") {
				t.Fatalf("line %d: %q; want the keys and a token per key", i+1, l)
			}
		}
	}

	gate := filepath.Join(dir, "go")
	holder := command(nil, "run", "--url", url, "--keys", "x,y", "--", "sh", "-c",
		fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.02; done`, filepath.Join(dir, "holding"), gate))
	require.NoError(t, holder.Start())
	waitFor(t, "the set held", func() bool { _, err := os.Stat(filepath.Join(dir, "holding")); return err == nil })
	if r := runBin(t, nil, "run", "--url", url, "--key", "y", "--wait", "0", "--", "true"); r.code != exitTaken {
		t.Errorf("--key y while a run holds x,y: %v; want exit %d", r, exitTaken)
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	require.NoError(t, holder.Wait())

	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"run", "--url", url, "--keys", "a,a", "--", "true"}, "keys[1]"},
		{[]string{"run", "--url", url, "--key", "a", "--keys", "b,c", "--", "true"}, "--keys"},
		{[]string{"run", "--url", url, "--keys", "b,c", "--shared", "--", "true"}, "--keys"},
	} {
		if r := runBin(t, nil, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.name) {
			t.Errorf("%v: got %v; want exit %d naming %s", tc.args, r, exitUsage, tc.name)
		}
	}
}

// TestRunLeaseEndedAtExit: dlock run exits 76, not CMD's 0, when the lease
// had ended by the time CMD exited: mutual exclusion may not have held to
// the end. Two ways, on both strategies. dlock frozen (SIGSTOP, sent by
// CMD) past the lease's TTL while CMD exits: when a helper continues it,
// the lease has expired by its clock. CMD breaking its own lock (dlock
// release --force) just before it exits, long before the renewal that
// would hear of it: dlock hears of it from its release, which the servers
// refuse.
func TestRunLeaseEndedAtExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		srvs int
	}{{"single", 1}, {"quorum", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := durable(urlOf(redistest.StartN(t, tc.srvs)...))
			r := runBin(t, nil, "run", "--url", url, "--ttl", "1s", "--key", "frozen", "--",
				"sh", "-c", `(sleep 2; kill -CONT $PPID) >/dev/null 2>&1 & kill -STOP $PPID; exit 0`)
			if r.code != exitLost || !strings.Contains(r.stderr, "lease on \"frozen\" ended") {
				t.Errorf("run frozen past its TTL as CMD exited: %v; want exit %d, the lease's end reported", r, exitLost)
			}
			r = runBin(t, nil, "run", "--url", url, "--ttl", "30s", "--key", "self", "--",
				"sh", "-c", `"$0" release --force --url "$1" --key self >/dev/null`, bin, url)
			if r.code != exitLost || !strings.Contains(r.stderr, "ended before") {
				t.Errorf("run whose CMD broke its lock and exited 0: %v; want exit %d, the lease's end reported", r, exitLost)
			}
		})
	}
}
