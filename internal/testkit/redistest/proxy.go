package redistest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	t      testing.TB
	srv    *toxiproxy.ApiServer
	name   string
	listen string // fixed at start: clients keep their address

	mu       sync.Mutex
	proxy    *toxiproxy.Proxy
	upstream string
	latency  time.Duration
	cut      bool
	toxics   []Toxic // AddToxic's, in the order added
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
	p := &Proxy{t: t, upstream: upstream,
		srv:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		name: "dlock-" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())}
	p.proxy = toxiproxy.NewProxy(p.srv, p.name, "127.0.0.1:0", upstream)
	if err := p.proxy.Start(); err != nil {
		t.Fatalf("redistest: proxy to %s: %v", upstream, err)
	}
	p.listen = p.proxy.Listen
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.toxics) == 0 {
			p.proxy.Toxics.ResetToxics(context.Background())
		}
		p.proxy.Stop()
	})
	return p
}

// Addr returns the proxy's host:port, to give clients instead of the
// server's.
func (p *Proxy) Addr() string { return p.listen }

// SetLatency delays every reply by d (millisecond resolution), so each
// round trip through the proxy takes d longer, on connections already open
// and new ones alike. Zero removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latency > 0 {
		if err := p.proxy.Toxics.RemoveToxic(context.Background(), latencyToxic); err != nil {
			p.t.Errorf("redistest: proxy %s: remove latency: %v", p.listen, err)
			return
		}
		p.latency = 0
	}
	if d <= 0 {
		return
	}
	if err := p.addToxic(latencyToxic, "latency", "downstream", fmt.Sprintf(`{"latency": %d}`, d.Milliseconds())); err != nil {
		p.t.Errorf("redistest: proxy %s: set latency %v: %v", p.listen, d, err)
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
			p.t.Errorf("redistest: proxy %s: cut %s: %v", p.listen, c.stream, err)
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
			p.t.Errorf("redistest: proxy %s: restore: %v", p.listen, err)
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
//
// AddToxic, RemoveToxic, RemoveToxics and SetUpstream replace the
// toxiproxy proxy behind the same address with a fresh one that has the
// new set of toxics from its start, so every one of them closes the link's
// open connections (clients redial). Toxiproxy v2.5.0 can deadlock when a
// toxic is added to or removed from links that a timeout or reset_peer
// toxic is tearing down; a proxy with no connections yet has no links.
func (p *Proxy) AddToxic(t Toxic) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.toxics {
		if x.Name == t.Name {
			return fmt.Errorf("redistest: proxy %s: a toxic named %q is already there", p.listen, t.Name)
		}
	}
	p.toxics = append(p.toxics, t)
	if err := p.rebuildLocked(); err != nil {
		p.toxics = p.toxics[:len(p.toxics)-1]
		return fmt.Errorf("redistest: proxy %s: add %s toxic %q: %w", p.listen, t.Type, t.Name, err)
	}
	return nil
}

// RemoveToxic removes the toxic named name, added with AddToxic.
func (p *Proxy) RemoveToxic(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.IndexFunc(p.toxics, func(x Toxic) bool { return x.Name == name })
	if i < 0 {
		return fmt.Errorf("redistest: proxy %s: no toxic named %q", p.listen, name)
	}
	p.toxics = slices.Delete(p.toxics, i, i+1)
	if err := p.rebuildLocked(); err != nil {
		return fmt.Errorf("redistest: proxy %s: remove toxic %q: %w", p.listen, name, err)
	}
	return nil
}

// RemoveToxics removes every toxic from the link, those of SetLatency and
// Cut included.
func (p *Proxy) RemoveToxics() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toxics, p.latency, p.cut = nil, 0, false
	if err := p.rebuildLocked(); err != nil {
		return fmt.Errorf("redistest: proxy %s: remove toxics: %w", p.listen, err)
	}
	return nil
}

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream
}

// SetUpstream makes the proxy forward to upstream from now on, as a
// service address moved to a promoted replica: every open connection is
// closed (clients redial), and the proxy keeps its own address and its
// toxics.
func (p *Proxy) SetUpstream(upstream string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = upstream
	if err := p.rebuildLocked(); err != nil {
		return fmt.Errorf("redistest: proxy %s: forward to %s: %w", p.listen, upstream, err)
	}
	return nil
}

// rebuildLocked stops the toxiproxy proxy, which closes its connections,
// and starts a new one on the same address with the current toxics added
// before it accepts anything.
func (p *Proxy) rebuildLocked() error {
	p.proxy.Stop()
	np := toxiproxy.NewProxy(p.srv, p.name, p.listen, p.upstream)
	var add []string
	if p.latency > 0 {
		add = append(add, toxicJSON(latencyToxic, "latency", "downstream", fmt.Sprintf(`{"latency": %d}`, p.latency.Milliseconds())))
	}
	if p.cut {
		add = append(add, toxicJSON(cutUp, "timeout", "upstream", `{"timeout": 0}`), toxicJSON(cutDown, "timeout", "downstream", `{"timeout": 0}`))
	}
	for _, t := range p.toxics {
		attrs, err := json.Marshal(t.Attributes)
		if err != nil {
			return err
		}
		if t.Attributes == nil {
			attrs = []byte("{}")
		}
		add = append(add, toxicJSON(t.Name, t.Type, t.Stream, string(attrs)))
	}
	for _, body := range add {
		if _, err := np.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return err
		}
	}
	// The port was just closed; should it not be free again at once, try
	// a little longer.
	err := np.Start()
	for deadline := time.Now().Add(time.Second); err != nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err = np.Start()
	}
	if err != nil {
		return err
	}
	p.proxy = np
	return nil
}

func toxicJSON(name, typ, stream, attrs string) string {
	return fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "attributes": %s}`, name, typ, stream, attrs)
}

func (p *Proxy) addToxic(name, typ, stream, attrs string) error {
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(toxicJSON(name, typ, stream, attrs)))
	return err
}
