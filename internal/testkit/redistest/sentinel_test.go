package redistest_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestSentinels: three Sentinels promote the replica once the master dies,
// and a write the replica never got, with replication cut, is gone.
func TestSentinels(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinels(t, 3)
	_, err := g.Master.Do("SET", "k", "replicated")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		if v, _ := g.Replica.Do("GET", "k"); v == "replicated" {
			break
		}
		require.NoError(t, ctx.Err(), "the write never reached the replica")
		time.Sleep(5 * time.Millisecond)
	}
	g.Link.Cut()
	_, err = g.Master.Do("SET", "k", "lost")
	require.NoError(t, err)
	start := time.Now()
	g.Master.Kill()
	if err := g.WaitPromoted(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %v after the master died", time.Since(start))
	if v, err := g.Replica.Do("GET", "k"); err != nil || v != "replicated" {
		t.Fatalf("GET k on the promoted replica = %q, %v; want the replicated value", v, err)
	}
}

// TestSentinelsSecured: a group whose data servers want an ACL user's
// password and whose Sentinels want another password, over TLS or not,
// comes up whole: the Sentinels log in to the master, find the replica
// through it (StartSentinels waits for that) and hold the master up;
// anyone without the passwords is refused.
func TestSentinelsSecured(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	for _, tc := range []struct {
		name string
		opts []redistest.Option
	}{
		{"plain", nil},
		{"tls", []redistest.Option{redistest.WithTLS(certs, redistest.ClientCertRequired)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := redistest.StartSentinels(t, 3, append(tc.opts,
				redistest.WithAuth("locker", "data-pw"), redistest.WithSentinelPassword("sentinel-pw"))...)
			var tlsCfg *tls.Config
			if tc.opts != nil {
				tlsCfg = certs.ClientConfig()
			}
			for _, s := range []*redistest.Server{g.Master, g.Replica} {
				if err := redisproc.PingAuth(s.Addr(), tlsCfg, "", ""); err == nil || !strings.HasPrefix(err.Error(), "-NOAUTH") {
					t.Errorf("PING %s without a password: %v; want NOAUTH", s.Addr(), err)
				}
				if err := redisproc.PingAuth(s.Addr(), tlsCfg, "locker", "sentinel-pw"); err == nil || !strings.HasPrefix(err.Error(), "-WRONGPASS") {
					t.Errorf("PING %s with the Sentinels' password: %v; want WRONGPASS", s.Addr(), err)
				}
			}
			for _, s := range g.Sentinels {
				if err := redisproc.PingAuth(s.Addr(), tlsCfg, "", "data-pw"); err == nil || !strings.HasPrefix(err.Error(), "-WRONGPASS") {
					t.Errorf("PING Sentinel %s with the data password: %v; want WRONGPASS", s.Addr(), err)
				}
			}
			// A Sentinel that could not log in would see the master's
			// NOAUTH as no answer, and call it down after SentinelDownAfter.
			time.Sleep(2 * redistest.SentinelDownAfter)
			for _, s := range g.Sentinels {
				flags, err := s.Do("SENTINEL", "MASTER", g.Name)
				require.NoError(t, err)
				if !strings.HasPrefix(flags, "name\n"+g.Name+"\n") || !strings.Contains(flags, "\nflags\nmaster\n") {
					t.Errorf("SENTINEL MASTER on %s:\n%s\nwant flags master alone", s.Addr(), flags)
				}
			}
		})
	}
}
