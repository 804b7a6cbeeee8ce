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
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/redisproc"
)

// fleet is the servers one demo starts: real redis-server processes when
// one is on PATH, else embedded miniredis servers. It stops every one of
// them in close.
type fleet struct {
	real    bool
	version string // of redis-server, when real
	dir     string

	mu      sync.Mutex
	servers []*server

	// Embedded servers only expire keys when told time has passed; one
	// goroutine tells them, until close.
	clockStop chan struct{}
	clockDone chan struct{}
}

// server is one server of a fleet.
type server struct {
	f     *fleet
	addr  string
	admin *redis.Client

	// real
	cmd    *exec.Cmd
	exited chan struct{}
	// embedded
	mini *miniredis.Miniredis

	mu   sync.Mutex
	dead bool
}

func newFleet(embedded bool) (*fleet, error) {
	f := &fleet{}
	if path, err := exec.LookPath("redis-server"); err == nil && !embedded {
		out, err := exec.Command(path, "--version").Output()
		if err != nil {
			return nil, fmt.Errorf("redis-server --version: %w", err)
		}
		f.real = true
		f.version = strings.TrimSpace(string(out))
		for field := range strings.FieldsSeq(f.version) {
			if v, ok := strings.CutPrefix(field, "v="); ok {
				f.version = v
			}
		}
		if f.dir, err = os.MkdirTemp("", "dlock-demo-"); err != nil {
			return nil, err
		}
		return f, nil
	}
	f.clockStop = make(chan struct{})
	f.clockDone = make(chan struct{})
	go f.driveClocks()
	return f, nil
}

func (f *fleet) driveClocks() {
	defer close(f.clockDone)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-f.clockStop:
			return
		case now := <-t.C:
			f.mu.Lock()
			for _, s := range f.servers {
				s.mu.Lock()
				if !s.dead {
					s.mini.FastForward(now.Sub(last))
				}
				s.mu.Unlock()
			}
			f.mu.Unlock()
			last = now
		}
	}
}

// start starts one server; args go to redis-server only.
func (f *fleet) start(ctx context.Context, args ...string) (*server, error) {
	s := &server{f: f}
	if f.real {
		var err error
		for range 5 {
			if err = s.exec(ctx, args); !errors.Is(err, errBind) {
				break
			}
		}
		if err != nil {
			return nil, err
		}
	} else {
		s.mini = miniredis.NewMiniRedis()
		if err := s.mini.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("embedded server: %w", err)
		}
		s.addr = s.mini.Addr()
	}
	s.admin = redis.NewClient(&redis.Options{Addr: s.addr, DisableIdentity: true, MaxRetries: -1})
	f.mu.Lock()
	f.servers = append(f.servers, s)
	f.mu.Unlock()
	return s, nil
}

var errBind = errors.New("address in use")

func (s *server) exec(ctx context.Context, args []string) error {
	port, err := redisproc.FreePort()
	if err != nil {
		return err
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir, err := os.MkdirTemp(s.f.dir, "srv-")
	if err != nil {
		return err
	}
	all := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--daemonize", "no", "--dir", dir, "--save", "", "--appendonly", "no",
		"--repl-diskless-sync-delay", "0",
	}, args...)
	cmd := exec.Command("redis-server", all...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(5 * time.Second)
	// Only our own process's answer counts: another program's server may
	// have taken the port first, and ours then exits.
	for pid, err := redisproc.ServerPID(s.addr, nil, "", ""); err != nil || pid != cmd.Process.Pid; pid, err = redisproc.ServerPID(s.addr, nil, "", "") {
		select {
		case <-s.exited:
			if strings.Contains(stderr.String(), "Address already in use") {
				return errBind
			}
			return fmt.Errorf("redis-server exited: %s", strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redis-server on %s: no PONG within 5s", s.addr)
		}
	}
	return nil
}

// Addr returns host:port.
func (s *server) Addr() string { return s.addr }

// Port returns the port, for short names in the demo's lines.
func (s *server) Port() string { _, p, _ := net.SplitHostPort(s.addr); return ":" + p }

// Pid returns the process id of a real server, 0 for an embedded one.
func (s *server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// kill stops the server at once: SIGKILL for a process, Close for an
// embedded server. It is safe to call more than once.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	s.dead = true
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	if s.mini != nil {
		s.mini.Close()
	}
}

// do runs an admin command and returns its reply as text.
func (s *server) do(ctx context.Context, args ...any) (string, error) {
	v, err := s.admin.Do(ctx, args...).Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// close stops every server of the fleet and the goroutine it started.
func (f *fleet) close() {
	f.mu.Lock()
	servers := f.servers
	f.servers = nil
	f.mu.Unlock()
	for _, s := range servers {
		s.kill()
		_ = s.admin.Close()
	}
	if f.clockStop != nil {
		close(f.clockStop)
		<-f.clockDone
	}
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}
