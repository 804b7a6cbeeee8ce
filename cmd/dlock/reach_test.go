package main

import (
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestRunTLS: dlock run on servers that speak only TLS and require a
// client certificate, by URL (rediss://, quorums://) and by flags (--addrs
// with --tls-ca, --tls-cert, --tls-key), with either client; dlock inspect
// reads the lock the same way. A plain URL on the TLS port fails as
// unavailable, saying the port may be TLS.
func TestRunTLS(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	srvs := redistest.StartN(t, 3, redistest.WithTLS(certs, redistest.ClientCertRequired))
	addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	query := "tls_ca=" + certs.CAFile + "&tls_cert=" + certs.ClientCertFile + "&tls_key=" + certs.ClientKey
	tlsFlags := []string{"--tls-ca", certs.CAFile, "--tls-cert", certs.ClientCertFile, "--tls-key", certs.ClientKey}
	for _, client := range []string{"go-redis", "valkey-go"} {
		for _, conn := range [][]string{
			{"--url", "rediss://" + addrs[0] + "?" + query},
			{"--url", "quorums://" + strings.Join(addrs, ",") + "?durable=true&" + query},
			append([]string{"--addrs", addrs[1]}, tlsFlags...),
			append([]string{"--addrs", strings.Join(addrs, ","), "--strategy", "quorum"}, tlsFlags...),
		} {
			args := append(append([]string{"run", "--client", client, "--key", "tls", "--ttl", "2s", "--wait", "10s"}, conn...),
				"--", "sh", "-c", `test -n "$DLOCK_TOKEN"`)
			if r := runBin(t, nil, args...); r.code != 0 {
				t.Errorf("run %v (%s): %v", conn, client, r)
			}
		}
		r := runBin(t, nil, append(append([]string{"inspect", "--client", client, "--addrs", addrs[0]}, tlsFlags...), "tls")...)
		if r.code != exitNotHeld {
			t.Errorf("inspect over TLS (%s): got %v; want exit %d (free)", client, r, exitNotHeld)
		}
		r = runBin(t, nil, "run", "--client", client, "--url", "redis://"+addrs[0]+"?dial_timeout=500ms", "--key", "tls", "--", "true")
		if want := "is it a TLS port? use rediss://"; r.code != exitUnavailable || !strings.Contains(r.stderr, want) {
			t.Errorf("run with redis:// on a TLS port (%s): got %v; want exit %d and %q", client, r, exitUnavailable, want)
		}
	}
}

// TestRunClusterSentinel: dlock run and inspect through redis+cluster://
// and redis+sentinel:// URLs.
func TestRunClusterSentinel(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	g := redistest.StartSentinels(t, 3)
	for _, url := range []string{
		"redis+cluster://" + cl.Addrs()[1],
		"redis+sentinel://" + strings.Join(g.Addrs(), ",") + "/" + g.Name,
	} {
		for _, client := range []string{"go-redis", "valkey-go"} {
			r := runBin(t, nil, "run", "--client", client, "--url", url, "--key", "reach", "--",
				"sh", "-c", `test -n "$DLOCK_TOKEN"`)
			if r.code != 0 {
				t.Errorf("run --url %s (%s): %v", url, client, r)
			}
			if r := runBin(t, nil, "inspect", "--client", client, "--url", url, "reach"); r.code != exitNotHeld {
				t.Errorf("inspect --url %s (%s): got %v; want exit %d (free)", url, client, r, exitNotHeld)
			}
		}
	}
	if v, _ := g.Master.Do("EXISTS", "dlock:{reach}"); v != "1" {
		t.Errorf("the Sentinels' master holds no hash for the lock; want the runs' (EXISTS = %q)", v)
	}
}
