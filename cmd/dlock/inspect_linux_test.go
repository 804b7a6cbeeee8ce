package main

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestInspectDialTimeout: dlock inspect gives up on a server that does not
// answer after the URL's dial_timeout, well before its own --timeout.
func TestInspectDialTimeout(t *testing.T) {
	t.Parallel()
	addr := unansweredAddr(t)
	for _, client := range redistest.Clients {
		start := time.Now()
		r := runBin(t, nil, "inspect", "--url", "redis://"+addr+"?dial_timeout=200ms&client="+client, "--timeout", "30s", "k")
		if d := time.Since(start); r.code != exitUnavailable || d > 1500*time.Millisecond {
			t.Errorf("%s: inspect of a server that does not answer, dial_timeout=200ms: got %v after %v; want exit %d within about a second",
				client, r, d.Round(time.Millisecond), exitUnavailable)
		}
	}
}

// unansweredAddr returns a loopback address where a connection attempt
// gets no answer: a listening socket with a backlog of 0 that never
// accepts, its one queue slot filled, so that Linux drops every further
// SYN. The socket is closed when the test ends.
func unansweredAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return addr // the queue is full: connection attempts go unanswered
		}
		t.Fatalf("filling the accept queue of %s: %v", addr, err)
	}
	t.Fatalf("connections to %s still answered after 8 were queued", addr)
	return ""
}
