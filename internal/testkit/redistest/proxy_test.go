package redistest

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func pingTime(t *testing.T, c *redis.Client) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	err := c.Ping(t.Context()).Err()
	return time.Since(start), err
}

func TestProxyLatency(t *testing.T) {
	s := Start(t)
	p := StartProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })

	if d, err := pingTime(t, c); err != nil || d > 100*time.Millisecond {
		t.Fatalf("PING through the proxy: %v after %v; want PONG within 100ms", err, d)
	}
	p.SetLatency(100 * time.Millisecond)
	if d, err := pingTime(t, c); err != nil || d < 100*time.Millisecond || d > 300*time.Millisecond {
		t.Fatalf("PING with 100ms latency: %v after %v; want PONG after 100..300ms", err, d)
	}
	p.SetLatency(200 * time.Millisecond) // replaces, does not add
	if d, err := pingTime(t, c); err != nil || d < 200*time.Millisecond || d > 400*time.Millisecond {
		t.Fatalf("PING with 200ms latency: %v after %v; want PONG after 200..400ms", err, d)
	}
	p.SetLatency(0)
	if d, err := pingTime(t, c); err != nil || d > 100*time.Millisecond {
		t.Fatalf("PING with latency removed: %v after %v; want PONG within 100ms", err, d)
	}
}

func TestProxyCut(t *testing.T) {
	s := Start(t)
	p := StartProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{
		Addr: p.Addr(), DisableIdentity: true, PoolSize: 1,
		ReadTimeout: 200 * time.Millisecond, MaxRetries: -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	_, err := pingTime(t, c)
	require.NoError(t, err, "PING")

	p.Cut()
	d, err := pingTime(t, c)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING across a cut: %v after %v; want a timeout", err, d)
	}
	if got := do(t, s, "SET", "direct", "1"); got != "OK" {
		t.Fatalf("the server itself must keep answering during a cut: %q", got)
	}

	p.Restore()
	if d, err := pingTime(t, c); err != nil || d > 100*time.Millisecond {
		t.Fatalf("PING after restore: %v after %v; want PONG", err, d)
	}
}

// The proxy's goroutines (accept loop, one pipeline per link and direction)
// all end with the test that started it.
func TestProxyNoLeak(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Run("latency", TestProxyLatency)
	t.Run("cut", TestProxyCut)
	goleak.VerifyNone(t, opt)
}

func TestProxyToxics(t *testing.T) {
	s := Start(t)
	p := StartProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	_, err := pingTime(t, c)
	require.NoError(t, err, "PING")
	require.NoError(t, p.AddToxic(Toxic{Name: "rst", Type: "reset_peer", Stream: "downstream", Attributes: map[string]int64{"timeout": 0}}))
	if err := p.AddToxic(Toxic{Name: "rst", Type: "reset_peer", Stream: "downstream"}); err == nil {
		t.Fatal("a second toxic of the same name was added; want an error")
	}
	if _, err := pingTime(t, c); err == nil {
		t.Fatal("PING through reset_peer answered; want the connection reset")
	}
	require.NoError(t, p.RemoveToxic("rst"))
	_, err = pingTime(t, c)
	require.NoError(t, err, "PING after the toxic was removed")
	require.NoError(t, p.AddToxic(Toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int64{"latency": 150}}))
	require.NoError(t, p.RemoveToxics())
	// Each change closed the open connections (see AddToxic), and this
	// client, which does not retry, may not have heard of it yet when it
	// sends: the PING goes on a new client's connection.
	c2 := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = c2.Close() })
	if d, err := pingTime(t, c2); err != nil || d > 100*time.Millisecond {
		t.Fatalf("PING after RemoveToxics: %v after %v; want PONG at once", err, d)
	}
}
