package redisproc_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
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
