package redisproc_test

import (
	"net"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	if err := redisproc.Ping(srv.Addr()); err != nil {
		t.Fatalf("Ping(%s) = %v; want nil", srv.Addr(), err)
	}
	_, err := srv.Do("CONFIG", "SET", "requirepass", "pw")
	require.NoError(t, err)
	if err := redisproc.Ping(srv.Addr()); err == nil {
		t.Fatal("Ping of a server asking for a password = nil; want its -NOAUTH")
	}
	if err := redisproc.PingAuth(srv.Addr(), nil, "", "pw"); err != nil {
		t.Fatalf("PingAuth with the password = %v; want nil", err)
	}
	if err := redisproc.PingAuth(srv.Addr(), nil, "", "wrong"); err == nil {
		t.Fatal("PingAuth with a wrong password = nil; want its -WRONGPASS")
	}
}

// TestServerPID: the process id a server gives is that of the process
// started, through a password too; a second redis-server started on a
// port that one holds fails to bind, and the port's answer is not its.
func TestServerPID(t *testing.T) {
	srv := redistest.Start(t)
	pid, err := redisproc.ServerPID(srv.Addr(), nil, "", "")
	require.NoError(t, err)
	if pid != srv.Pid() {
		t.Fatalf("ServerPID = %d; want the started process's %d", pid, srv.Pid())
	}
	_, err = srv.Do("CONFIG", "SET", "requirepass", "pw")
	require.NoError(t, err)
	if pid, err := redisproc.ServerPID(srv.Addr(), nil, "", "pw"); err != nil || pid != srv.Pid() {
		t.Fatalf("ServerPID with the password = %d, %v; want %d", pid, err, srv.Pid())
	}

	bin, err := redisproc.ServerPath()
	require.NoError(t, err)
	other := exec.Command(bin, "--port", strconv.Itoa(srv.Port()), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, other.Start())
	defer func() {
		_ = other.Process.Kill()
		_ = other.Wait()
	}()
	if pid, err := redisproc.ServerPID(srv.Addr(), nil, "", "pw"); err != nil || pid == other.Process.Pid {
		t.Fatalf("ServerPID of the port while a second server fails to bind it = %d, %v; want the first's %d", pid, err, srv.Pid())
	}
}

func TestFreePort(t *testing.T) {
	p, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", p, err)
	}
	l.Close()
	if err := redisproc.Ping("127.0.0.1:" + strconv.Itoa(p)); err == nil {
		t.Fatal("Ping of a closed port = nil; want an error")
	}
}
