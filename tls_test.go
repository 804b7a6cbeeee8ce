package dlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// tlsQuery is the query of a TLS URL that trusts certs' CA and, with cert,
// presents its client certificate.
func tlsQuery(certs *redistest.Certs, cert bool) string {
	q := url.Values{"tls_ca": {certs.CAFile}}
	if cert {
		q.Set("tls_cert", certs.ClientCertFile)
		q.Set("tls_key", certs.ClientKey)
	}
	return q.Encode()
}

// TestOpenTLS locks through OpenURL's TLS schemes, on servers that speak
// only TLS: rediss:// on one, quorums:// on three; with the client
// certificate the servers require, or may ask for; and through Config.TLS.
func TestOpenTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	for _, auth := range []redistest.TLSClients{redistest.ClientCertRequired, redistest.ClientCertOptional} {
		t.Run("tls-auth-clients="+string(auth), func(t *testing.T) {
			srvs := redistest.StartN(t, 3, redistest.WithTLS(certs, auth))
			addrs := []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
			for _, client := range redistest.Clients {
				t.Run(client, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					defer cancel()
					lockOnce := func(raw string) {
						t.Helper()
						lk, err := dlock.OpenURL(ctx, raw)
						require.NoError(t, err, "OpenURL(%s)", raw)
						defer lk.Close()
						l, err := lk.TryAcquire(ctx, "tls-"+client)
						if err != nil {
							t.Fatalf("%s: TryAcquire: %v", raw, err)
						}
						if !l.Fenced() {
							t.Errorf("%s: lease has no token", raw)
						}
						require.NoError(t, l.Release(ctx))
					}
					q := "&client=" + client
					lockOnce("rediss://" + addrs[0] + "?" + tlsQuery(certs, true) + q)
					lockOnce("quorums://" + strings.Join(addrs, ",") + "?durable=true&" + tlsQuery(certs, true) + q)

					noCert := "rediss://" + addrs[0] + "?dial_timeout=1s&" + tlsQuery(certs, false) + q
					if auth == redistest.ClientCertOptional {
						lockOnce(noCert)
					} else if lk, err := dlock.OpenURL(ctx, noCert); err == nil {
						lk.Close()
						t.Errorf("OpenURL without the client certificate a server requires: no error")
					}

					lk, err := dlock.Open(ctx, dlock.Config{Addrs: addrs[1:2], Client: client, TLS: certs.ClientConfig()})
					require.NoError(t, err, "Open with Config.TLS")
					l, err := lk.TryAcquire(ctx, "tls-config-"+client)
					if err != nil {
						t.Fatalf("Config.TLS: TryAcquire: %v", err)
					}
					require.NoError(t, l.Release(ctx))
					require.NoError(t, lk.Close())
				})
			}
		})
	}
}

// TestOpenTLSMismatch: a client without TLS on a TLS port, or with TLS on
// a plain port, is told which it is, rather than "EOF" or a timeout.
func TestOpenTLSMismatch(t *testing.T) {
	certs := redistest.NewCerts(t)
	tlsSrv := redistest.Start(t, redistest.WithTLS(certs, redistest.ClientCertOptional))
	plain := redistest.Start(t)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			q := "?dial_timeout=500ms&client=" + client

			_, err := dlock.OpenURL(ctx, "redis://"+tlsSrv.Addr()+q)
			if want := "is it a TLS port? use rediss://"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("redis:// to a TLS port: %v; want an error with %q", err, want)
			}

			// A quorum does not call its servers at Open: the first
			// acquisition tells.
			lk, err := dlock.OpenURL(ctx, "quorum://"+tlsSrv.Addr()+q+"&durable=true")
			require.NoError(t, err)
			defer lk.Close()
			_, err = lk.TryAcquire(ctx, "mismatch")
			if want := "is it a TLS port? use quorums://"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("quorum:// to a TLS port: TryAcquire: %v; want an error with %q", err, want)
			}

			start := time.Now()
			_, err = dlock.OpenURL(ctx, "rediss://"+plain.Addr()+q+"&"+tlsQuery(certs, false))
			if want := "is it a plain (non-TLS) port?"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("rediss:// to a plain port: %v; want an error with %q", err, want)
			}
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				t.Errorf("rediss:// to a plain port took the whole context (%v); want the 500ms dial timeout", time.Since(start))
			}
		})
	}
}

// TestParseURLTLS: the files a TLS URL names end up in Config.TLS.
func TestParseURLTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	cfg, err := connect.ParseURL("rediss://h?" + tlsQuery(certs, true) + "&tls_server_name=redis.internal")
	require.NoError(t, err)
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || len(cfg.TLS.Certificates) != 1 || cfg.TLS.ServerName != "redis.internal" {
		t.Fatalf("Config.TLS = %+v; want the CA, one client certificate and the server name", cfg.TLS)
	}
	if _, err := connect.ParseURL("rediss://h?tls_ca=" + url.QueryEscape(certs.ClientKey)); err == nil {
		t.Errorf("tls_ca naming a key file: no error; want one saying it holds no certificate")
	}
}
