package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinel timings, short so a failover takes seconds: a master is down
// for a Sentinel after 400 ms without an answer, and a failover that has
// not ended 2 s after it began is given up (and tried again 4 s later).
const (
	SentinelDownAfter       = 400 * time.Millisecond
	SentinelFailoverTimeout = 2 * time.Second
)

// SentinelGroup is a master, one replica of it, and Sentinels that
// monitor the master under Name, each a Server owned by the test. The
// replica replicates through Link, a Proxy, so that a test can cut
// replication (Link.Cut) and let a write reach the master alone.
type SentinelGroup struct {
	t         testing.TB
	Name      string
	Master    *Server
	Replica   *Server
	Link      *Proxy
	Sentinels []*Server
}

// WithSentinelPassword makes StartSentinels' Sentinels ask for password
// (requirepass), which they also give each other. Start ignores it.
func WithSentinelPassword(password string) Option {
	return func(c *config) { c.sentinelPass = password }
}

// StartSentinels starts a master, a replica, and n Sentinels (a majority
// of them must agree that the master is down), and returns once the
// replica is synced and every Sentinel knows the replica and every other
// Sentinel: only then can they fail the master over. opts apply to the
// master and the replica, but for WithSentinelPassword; WithTLS applies to
// the Sentinels too, and they log in to the master and the replica with
// WithAuth's credentials.
func StartSentinels(t testing.TB, n int, opts ...Option) *SentinelGroup {
	t.Helper()
	g := &SentinelGroup{t: t, Name: "dlock-master"}
	var c config
	for _, o := range opts {
		o(&c)
	}
	sentinelOpts := []Option{WithArgs("--sentinel")}
	if c.tls != nil {
		sentinelOpts = append(sentinelOpts, WithTLS(c.tls, c.tlsAuth))
	}
	if c.sentinelPass != "" {
		sentinelOpts = append(sentinelOpts, WithAuth("", c.sentinelPass))
	}
	var auth string
	if c.password != "" {
		auth = fmt.Sprintf("sentinel auth-pass %s %s\n", g.Name, c.password)
	}
	if c.user != "" {
		auth += fmt.Sprintf("sentinel auth-user %s %s\n", g.Name, c.user)
	}
	g.Master = Start(t, opts...)
	g.Link = StartProxy(t, g.Master.Addr())
	g.Replica = Start(t, append(opts, WithReplicaOf(g.Master), WithReplicaVia(g.Link.Addr()))...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Replica.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		dir := t.TempDir()
		id := make([]byte, 20)
		_, _ = rand.Read(id)
		conf := fmt.Sprintf(`sentinel myid %s
sentinel monitor %[2]s 127.0.0.1 %[3]d %[4]d
sentinel down-after-milliseconds %[2]s %[5]d
sentinel failover-timeout %[2]s %[6]d
%[7]s`, hex.EncodeToString(id), g.Name, g.Master.Port(), n/2+1, SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds(), auth)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatalf("redistest: write %s: %v", path, err)
		}
		g.Sentinels = append(g.Sentinels, Start(t, append([]Option{func(c *config) { c.conf = path }}, sentinelOpts...)...))
	}
	// Sentinels find each other by the hello messages each publishes on
	// the master every 2 s.
	err := g.waitFor(ctx, "every Sentinel to know the replica and the others", func() bool {
		for _, s := range g.Sentinels {
			m, err := s.Do("SENTINEL", "MASTER", g.Name)
			if err != nil || pair(m, "num-slaves") != "1" || pair(m, "num-other-sentinels") != strconv.Itoa(n-1) {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Addrs returns the Sentinels' host:port.
func (g *SentinelGroup) Addrs() []string {
	a := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		a[i] = s.Addr()
	}
	return a
}

// WaitPromoted waits until every Sentinel names the replica as the master
// and the replica says it is one, or until ctx ends.
func (g *SentinelGroup) WaitPromoted(ctx context.Context) error {
	return g.waitFor(ctx, "the replica promoted", func() bool {
		for _, s := range g.Sentinels {
			out, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.Name)
			if err != nil || out != "127.0.0.1\n"+strconv.Itoa(g.Replica.Port()) {
				return false
			}
		}
		role, err := g.Replica.Info("role")
		return err == nil && role == "master"
	})
}

func (g *SentinelGroup) waitFor(ctx context.Context, what string, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: sentinels: waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// pair returns the value after name in a reply of alternating names and
// values, one per line (SENTINEL MASTER).
func pair(reply, name string) string {
	lines := strings.Split(reply, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		if lines[i] == name {
			return lines[i+1]
		}
	}
	return ""
}
