package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy in front of one server, run in the test process
// (toxiproxy), through which a test slows or cuts the link between its
// clients and the server. Its methods are safe for concurrent use and report
// failures with t.Errorf, so they may be called from any goroutine.
type Proxy struct {
	t     testing.TB
	proxy *toxiproxy.Proxy

	mu      sync.Mutex
	latency time.Duration
	cut     bool
}

const (
	latencyToxic = "dlock_latency"
	cutUp        = "dlock_cut_up"
	cutDown      = "dlock_cut_down"
)

// StartProxy starts a proxy on a free port of 127.0.0.1 that forwards to
// upstream (host:port). It is stopped, and its connections closed, when the
// test ends.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	name := "dlock-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("redistest: proxy to %s: %v", upstream, err)
	}
	t.Cleanup(func() {
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
	})
	return &Proxy{t: t, proxy: p}
}

// Addr returns the proxy's host:port, to give clients instead of the
// server's.
func (p *Proxy) Addr() string {
	p.proxy.Lock()
	defer p.proxy.Unlock()
	return p.proxy.Listen
}

// SetLatency delays every reply by d (millisecond resolution), so each
// round trip through the proxy takes d longer, on connections already open
// and new ones alike. Zero removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latency > 0 {
		if err := p.proxy.Toxics.RemoveToxic(context.Background(), latencyToxic); err != nil {
			p.t.Errorf("redistest: proxy %s: remove latency: %v", p.proxy.Listen, err)
			return
		}
		p.latency = 0
	}
	if d <= 0 {
		return
	}
	if err := p.addToxic(latencyToxic, "latency", "downstream", fmt.Sprintf(`{"latency": %d}`, d.Milliseconds())); err != nil {
		p.t.Errorf("redistest: proxy %s: set latency %v: %v", p.proxy.Listen, d, err)
		return
	}
	p.latency = d
}

// Cut partitions the link: connections stay open and new ones are accepted,
// but every byte in either direction is dropped, so a client waits for its
// own timeout, as behind a dead switch. Bytes dropped stay lost after
// Restore; a client should drop connections whose calls timed out (both
// go-redis and valkey-go do).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	for _, c := range []struct{ name, stream string }{{cutUp, "upstream"}, {cutDown, "downstream"}} {
		if err := p.addToxic(c.name, "timeout", c.stream, `{"timeout": 0}`); err != nil {
			p.t.Errorf("redistest: proxy %s: cut %s: %v", p.proxy.Listen, c.stream, err)
			return
		}
	}
	p.cut = true
}

// Restore ends a Cut: bytes flow again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return
	}
	for _, name := range []string{cutUp, cutDown} {
		if err := p.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
			p.t.Errorf("redistest: proxy %s: restore: %v", p.proxy.Listen, err)
			return
		}
	}
	p.cut = false
}

func (p *Proxy) addToxic(name, typ, stream, attrs string) error {
	body := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "attributes": %s}`, name, typ, stream, attrs)
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}
