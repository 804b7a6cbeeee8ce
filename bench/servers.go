package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockgo/dlock/internal/redisproc"
)

// server is one redis-server process this program started and must stop.
type server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startServers starts n redis-server processes on free loopback ports,
// without persistence. On error it stops the ones already started.
func startServers(ctx context.Context, bin string, n int) ([]*server, error) {
	var out []*server
	for range n {
		s, err := startServer(ctx, bin)
		if err != nil {
			stopServers(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func startServer(ctx context.Context, bin string) (*server, error) {
	var last error
	for range 5 { // a free port may be taken between probe and bind
		port, err := redisproc.FreePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(ctx, bin, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func launch(ctx context.Context, bin string, port int) (*server, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", "redis.log",
		"--daemonize", "no",
	)
	// Own process group: a terminal's ^C reaches only this program, which
	// then stops the servers itself; Pdeathsig covers a SIGKILL of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Only our own process's answer counts (see redisproc.ServerPID).
		if pid, err := redisproc.ServerPID(s.addr, nil, "", ""); err == nil && pid == cmd.Process.Pid {
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(dir + "/redis.log")
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, lastLine(string(log)))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("redis-server did not answer PING within 5s")
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// stop ends the process by its pid: SIGTERM, then SIGKILL after 2s.
func (s *server) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

func stopServers(ss []*server) {
	for _, s := range ss {
		s.stop()
	}
}
