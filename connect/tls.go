package connect

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
)

// dialer makes the connections of the clients Open builds: TCP, then TLS
// when the Config asks for it. What it adds to the clients' own dialling is
// a plain answer when TLS is on one side only, which the clients would
// report as "EOF" or a timeout: a TLS port drops a plain client's first
// command, and a plain port waits, silent, for the end of a line inside a
// TLS handshake.
type dialer struct {
	tls     *tls.Config
	timeout time.Duration
	scheme  string // the URL scheme that would say TLS, for the hint
}

func (cfg *Config) dialer() *dialer {
	d := &dialer{tls: cfg.TLS, timeout: cfg.DialTimeout, scheme: cfg.tlsScheme()}
	if d.timeout == 0 {
		d.timeout = settings.DefaultDialTimeout
	}
	return d
}

// tlsScheme returns the URL scheme that says TLS for cfg's way of reaching
// its servers.
func (cfg *Config) tlsScheme() string {
	switch {
	case cfg.Strategy == StrategyQuorum:
		return "quorums://"
	case cfg.Cluster:
		return "rediss+cluster://"
	case cfg.SentinelMaster != "":
		return "rediss+sentinel://"
	}
	return "rediss://"
}

// dial is a go-redis Options.Dialer.
func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.timeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}
	return d.finish(ctx, nd, network, addr)
}

// dialValkey is a valkey-go ClientOption.DialCtxFn.
func (d *dialer) dialValkey(ctx context.Context, addr string, nd *net.Dialer, _ *tls.Config) (net.Conn, error) {
	return d.finish(ctx, nd, "tcp", addr)
}

func (d *dialer) finish(ctx context.Context, nd *net.Dialer, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if d.tls == nil {
		if err := probe(ctx, conn); err != nil {
			conn.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				return nil, fmt.Errorf("dlock: %s closed the connection before answering: is it a TLS port? use %s or Config.TLS: %w", addr, d.scheme, err)
			}
			return nil, err
		}
		return conn, nil
	}
	cfg := d.tls
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("dlock: %s did not answer the TLS handshake: is it a plain (non-TLS) port? %w", addr, err)
		}
		return nil, fmt.Errorf("dlock: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// probe sends PING on a fresh plain connection and reads the line that
// answers it, whatever it says (+PONG, or -NOAUTH before AUTH): every
// server that speaks RESP answers, where a TLS port closes the connection.
// One round trip per connection, which the clients then keep.
func probe(ctx context.Context, conn net.Conn) error {
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return err
		}
		defer conn.SetDeadline(time.Time{})
	}
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	// The reply is one line, and nothing follows it unasked: reading up to
	// its end leaves the connection clean for the client.
	var buf [256]byte
	for n := 0; ; {
		m, err := conn.Read(buf[n:])
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			return nil
		}
		if err != nil {
			return err
		}
		if n == len(buf) {
			return fmt.Errorf("dlock: %s answered PING with %q...: not a Redis server?", conn.RemoteAddr(), buf[:32])
		}
	}
}
