// Package redisproc holds what every place that starts its own
// redis-server needs: a free loopback port, and a readiness check. The
// test servers (internal/testkit/redistest), the demo (cmd/dlock) and the
// benchmarks (bench) share it.
//
// The tests' server binary is chosen in one place, ServerPath: the
// DLOCK_SERVER environment variable, redis-server on PATH when unset, so
// that one suite runs on Redis and on Valkey.
package redisproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServerEnv names the environment variable that holds the server binary
// the tests run: an absolute path (a Valkey build, say) or a name looked
// up on PATH. Unset or empty means redis-server.
const ServerEnv = "DLOCK_SERVER"

// ServerPath returns the server binary to run, from ServerEnv. A relative
// path with a slash is refused: each package's tests run in their own
// folder, so it would name a different file in every package.
func ServerPath() (string, error) {
	bin := os.Getenv(ServerEnv)
	if bin == "" {
		bin = "redis-server"
	}
	if strings.Contains(bin, "/") && !filepath.IsAbs(bin) {
		return "", fmt.Errorf("redisproc: %s=%s is a relative path; give an absolute one (tests run in their package's folder)", ServerEnv, bin)
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("redisproc: server binary %s=%q: %w (./scripts/test.sh installs redis-server)", ServerEnv, bin, err)
	}
	return path, nil
}

// CLIPath returns the command-line client that goes with ServerPath's
// server: the file beside it whose name has "cli" for "server"
// (redis-server: redis-cli on PATH; /x/valkey-server: /x/valkey-cli), so
// that a cluster is joined by the cli of the same release.
func CLIPath() (string, error) {
	server, err := ServerPath()
	if err != nil {
		return "", err
	}
	dir, name := filepath.Split(server)
	if !strings.Contains(name, "server") {
		return "", fmt.Errorf("redisproc: no cli goes with server %s: its name has no \"server\" to replace", server)
	}
	cli := filepath.Join(dir, strings.Replace(name, "server", "cli", 1))
	if _, err := os.Stat(cli); err != nil {
		return "", fmt.Errorf("redisproc: the cli beside server %s: %w", server, err)
	}
	return cli, nil
}

// FreePort returns a loopback port that was free a moment ago. Another
// process may take it before the caller binds it; callers retry on a bind
// failure.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ping succeeds only when the server at addr answers PING with +PONG, so a
// server still loading its data (-LOADING) or asking for a password
// (-NOAUTH) is not ready yet; the error carries its answer.
func Ping(addr string) error { return PingAuth(addr, nil, "", "") }

// PingTLS is Ping over TLS with cfg.
func PingTLS(addr string, cfg *tls.Config) error { return PingAuth(addr, cfg, "", "") }

// PingAuth is Ping over TLS when cfg is not nil, and after AUTH with user
// (none when empty) and password when password is not empty: the check of
// a server that asks for credentials. A refused AUTH is its error.
func PingAuth(addr string, cfg *tls.Config, user, password string) error {
	_, err := session(addr, cfg, user, password, false)
	return err
}

// ServerPID is PingAuth that also returns the process id of the server
// that answered (INFO's process_id): whoever started a server on a port
// tells by it its own from another process's that took the port between
// FreePort and the bind, and answers there while its own fails to bind.
func ServerPID(addr string, cfg *tls.Config, user, password string) (int, error) {
	return session(addr, cfg, user, password, true)
}

// session connects to addr, logs in when password is set, wants PONG to
// a PING and, when pid is set, reads the server's process id.
func session(addr string, cfg *tls.Config, user, password string, pid bool) (int, error) {
	var (
		c   net.Conn
		err error
	)
	if cfg == nil {
		c, err = net.DialTimeout("tcp", addr, 200*time.Millisecond)
	} else {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 200 * time.Millisecond}, Config: cfg}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	r := bufio.NewReader(c)
	if password != "" {
		auth := []string{"AUTH", password}
		if user != "" {
			auth = []string{"AUTH", user, password}
		}
		if err := call(c, r, "+OK", auth...); err != nil {
			return 0, err
		}
	}
	if err := call(c, r, "+PONG", "PING"); err != nil || !pid {
		return 0, err
	}
	if err := send(c, "INFO", "server"); err != nil {
		return 0, err
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(head), "$"))
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("redisproc: INFO answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redisproc: INFO server has no process_id")
}

// call sends args as one RESP array, so that a password may hold spaces,
// and wants the one-line answer want.
func call(c net.Conn, r *bufio.Reader, want string, args ...string) error {
	if err := send(c, args...); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != want {
		return errors.New(line)
	}
	return nil
}

// send writes args as one RESP array.
func send(c net.Conn, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := io.WriteString(c, b.String())
	return err
}

// Start runs a throwaway server (ServerPath) without persistence on a free
// loopback port, for examples and tools that have no testing.TB, and
// returns once it answers PING. stop kills it and waits for it to end.
// Extra config directives in args ("--appendonly", "yes") come after the
// defaults, so they override them.
func Start(args ...string) (addr string, stop func(), err error) {
	bin, err := ServerPath()
	if err != nil {
		return "", nil, err
	}
	port, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, args...)...)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// Another process's server may hold the port, which ours then
		// fails to bind: only our own answer counts.
		if pid, err := ServerPID(addr, nil, "", ""); err == nil && pid == cmd.Process.Pid {
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("redisproc: %s on %s did not answer PING within 5s", bin, addr)
}
