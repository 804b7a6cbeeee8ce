package redistest

import (
	"context"
	"encoding/json"
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

// Toxic is one toxiproxy toxic: Type is "latency", "timeout", "reset_peer",
// and so on, Stream "upstream" (client to server) or "downstream" (server to
// client), Attributes its integer settings ({"latency": 100, "jitter": 20},
// {"timeout": 0}), as toxiproxy documents them.
type Toxic struct {
	Name       string
	Type       string
	Stream     string
	Attributes map[string]int64
}

// AddToxic adds t to the link, next to the toxics already there; its Name
// must be unique among them. Unlike SetLatency and Cut it returns its error
// rather than reporting it, so that a test may treat a failure as part of
// what it measures.
func (p *Proxy) AddToxic(t Toxic) error {
	attrs, err := json.Marshal(t.Attributes)
	if err != nil {
		return err
	}
	if t.Attributes == nil {
		attrs = []byte("{}")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.addToxic(t.Name, t.Type, t.Stream, string(attrs)); err != nil {
		return fmt.Errorf("redistest: proxy %s: add %s toxic %q: %w", p.Addr(), t.Type, t.Name, err)
	}
	return nil
}

// RemoveToxic removes the toxic named name, added with AddToxic.
func (p *Proxy) RemoveToxic(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("redistest: proxy %s: remove toxic %q: %w", p.Addr(), name, err)
	}
	return nil
}

// RemoveToxics removes every toxic from the link, those of SetLatency and
// Cut included.
func (p *Proxy) RemoveToxics() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proxy.Toxics.ResetToxics(context.Background())
	p.latency, p.cut = 0, false
}

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string {
	p.proxy.Lock()
	defer p.proxy.Unlock()
	return p.proxy.Upstream
}

// SetUpstream makes the proxy forward to upstream from now on, as a
// service address moved to a promoted replica: every open connection is
// closed (clients redial), and the proxy keeps its own address and its
// toxics.
func (p *Proxy) SetUpstream(upstream string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	listen := p.Addr()
	err := p.proxy.Update(&toxiproxy.Proxy{Listen: listen, Upstream: upstream, Enabled: true})
	// The listener is closed and opened again on the same port; should the
	// port not be free again at once, try a little longer.
	for deadline := time.Now().Add(time.Second); err != nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = p.proxy.Start()
	}
	if err != nil {
		return fmt.Errorf("redistest: proxy %s: forward to %s: %w", listen, upstream, err)
	}
	return nil
}

func (p *Proxy) addToxic(name, typ, stream, attrs string) error {
	body := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "attributes": %s}`, name, typ, stream, attrs)
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}
