package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestTLS: a server started WithTLS answers its own client over TLS, on
// its only port, and asks for a client certificate as told.
func TestTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	for _, tc := range []struct {
		auth          redistest.TLSClients
		noCertAnswers bool
	}{
		{redistest.ClientCertRequired, false},
		{redistest.ClientCertOptional, true},
	} {
		t.Run(string(tc.auth), func(t *testing.T) {
			s := redistest.Start(t, redistest.WithTLS(certs, tc.auth))
			if got, err := s.Do("CONFIG", "GET", "port"); err != nil || got != "port\n0" {
				t.Fatalf("CONFIG GET port = %q, %v; want 0 (TLS only)", got, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			noCert := certs.ClientConfig()
			noCert.Certificates = nil
			c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: noCert, DisableIdentity: true, MaxRetries: -1})
			defer c.Close()
			err := c.Ping(ctx).Err()
			if got := err == nil; got != tc.noCertAnswers {
				t.Errorf("PING without a client certificate: %v; want answered %v", err, tc.noCertAnswers)
			}
			plain := redis.NewClient(&redis.Options{Addr: s.Addr(), DisableIdentity: true, MaxRetries: -1})
			defer plain.Close()
			if err := plain.Ping(ctx).Err(); err == nil {
				t.Errorf("PING without TLS answered; want the TLS port to refuse it")
			}
		})
	}
}
