package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestElect runs several dlock elect of one office at once: one leader at
// a time, each with a token above the one before, the office and its
// token in the child's environment; dlock inspect shows the leader's
// value.
func TestElect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := urlOf(srv)
	file := filepath.Join(t.TempDir(), "log")
	const n = 4
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = runBin(t, nil, "elect", "--url", url, "--name", "sched", "--value", fmt.Sprintf("cand-%d", i), "--",
				"sh", "-c", fmt.Sprintf(`echo "start $DLOCK_OFFICE $DLOCK_KEY $DLOCK_TOKEN" >> %s; sleep 0.2; echo "end" >> %s`, file, file))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("candidate %d: %v", i, r)
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("got %d lines; want %d:\n%s", len(lines), 2*n, b)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		f := strings.Fields(lines[i])
		if len(f) != 4 || f[0] != "start" || f[1] != "sched" || f[2] != "election:sched" || lines[i+1] != "end" {
			t.Fatalf("terms overlapped or lacked their environment at line %d:\n%s", i+1, b)
		}
		tok, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("line %d: token %q; want above %d", i+1, f[3], last)
		}
		last = tok
	}

	// A leader in office: inspect shows its value; a bounded campaign
	// gives up with 75.
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	leader := command(nil, "elect", "--url", url, "--name", "held", "--value", "db-1:5432", "--",
		"sh", "-c", fmt.Sprintf(`touch %s; sleep 3`, ready))
	var lout, lerr bytes.Buffer
	leader.Stdout, leader.Stderr = &lout, &lerr
	require.NoError(t, leader.Start())
	waitFor(t, "the leader", func() bool { _, err := os.Stat(ready); return err == nil })
	if r := runBin(t, nil, "inspect", "--url", url, "election:held"); r.code != 0 || !strings.Contains(r.stdout, "db-1:5432") {
		t.Errorf("inspect of the office: %v; want held, showing the leader's value", r)
	}
	if r := runBin(t, nil, "elect", "--url", url, "--name", "held", "--wait", "300ms", "--", "true"); r.code != exitTaken {
		t.Errorf("a campaign bounded by --wait while another leads: %v; want exit %d", r, exitTaken)
	}
	if r := wait(t, leader, &lout, &lerr); r.code != 0 {
		t.Errorf("leader: %v", r)
	}

	for _, args := range [][]string{
		{"elect", "--url", url, "--", "true"},
		{"elect", "--url", url, "--name", "x"},
		{"elect", "--url", url, "--name", "x", "--value", "", "--", "true"},
	} {
		if r := runBin(t, nil, args...); r.code != exitUsage {
			t.Errorf("%v: got %v; want exit %d", args, r, exitUsage)
		}
	}
}

// TestElectLost takes the office's lock away behind a leader's back:
// dlock stops the command and exits 76.
func TestElectLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := command(nil, "elect", "--url", urlOf(srv), "--name", "lost", "--ttl", "1s", "--grace", "300ms",
		"--", "sh", "-c", fmt.Sprintf(`echo $$ > %s; exec sleep 30`, pidFile))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	var pid int
	waitFor(t, "the child's pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	_, err := srv.Do("DEL", "dlock:{election:lost}")
	require.NoError(t, err)
	start := time.Now()
	r := wait(t, cmd, &stdout, &stderr)
	if r.code != exitLost || !strings.Contains(r.stderr, "dlock elect:") {
		t.Errorf("got %v; want exit %d, reported by dlock elect", r, exitLost)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("dlock exited %v after the office was taken; want within about a TTL plus the grace", d)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("child %d still runs after dlock exited", pid)
	}
}
