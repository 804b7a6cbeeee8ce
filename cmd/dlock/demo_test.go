package main

import (
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemo runs the demo with redis-server on PATH and PostgreSQL
// installed, and with PATH emptied and DLOCK_PG_BIN naming an empty
// folder (embedded servers, no PostgreSQL: its step skipped), checks each
// row's outcome, and that no server it started still listens.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"redis-server", nil, []string{
			"real redis-server",
			"=> single: the paused holder was fenced out at the resource",
			"refused: single: lock on \"job-acked\" acknowledged by 0 of 1 replicas",
			"(larger than A's), while A's lease still runs",
			"=> failover: TWO HOLDERS at once",
			"so the fence refused A's write (resource holds \"from B\"",
			"lost-data guard on",
			"=> quorum: locks still granted with 2 of 5 servers dead",
			"=> paused holder: without a fence the stale write landed",
			"with dlock's quorum token the resource refused it (register holds \"from B\")",
			"REFUSED by PostgreSQL: stale token",
			"=> PostgreSQL: the row holds \"from B\"",
		}},
		{"embedded", []string{"PATH=" + t.TempDir(), "DLOCK_PG_BIN=" + t.TempDir()}, []string{
			"embedded in-process miniredis",
			"=> single: the paused holder was fenced out at the resource",
			"needs redis-server",
			"embedded servers declared durable (lost-data guard off)",
			"=> quorum: locks still granted with 2 of 5 servers dead",
			"=> paused holder: without a fence the stale write landed",
			"with dlock's quorum token the resource refused it (register holds \"from B\")",
			"PostgreSQL",
			"not installed: step skipped",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r := runBin(t, tc.env, "demo")
			if r.code != 0 {
				t.Fatalf("got %v; want exit 0", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "unexpected") {
				t.Errorf("an outcome was unexpected:\n%s", r.stdout)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("demo took %v; want under a minute", d)
			}
			ports := regexp.MustCompile(`:(\d{4,5})\b`).FindAllStringSubmatch(r.stdout, -1)
			if len(ports) < 10 {
				t.Fatalf("found %d server ports in the output; want them named", len(ports))
			}
			for _, p := range ports {
				if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p[1], 200*time.Millisecond); err == nil {
					c.Close()
					t.Errorf("port %s still answers after the demo", p[1])
				}
			}
		})
	}
}

func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	cmd := command(nil, "demo")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond) // inside row [1]
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("demo did not stop within 10s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitSignal+2 {
		t.Errorf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s", code, exitSignal+2, stdout.String(), stderr.String())
	}
	for _, p := range regexp.MustCompile(`:(\d{4,5})\b`).FindAllStringSubmatch(stdout.String(), -1) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p[1], 200*time.Millisecond); err == nil {
			c.Close()
			t.Errorf("port %s still answers after the interrupted demo", p[1])
		}
	}
}
