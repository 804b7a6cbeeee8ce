package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the files of a certificate authority made for one test, a
// server certificate it signed for 127.0.0.1 and localhost, and a client
// certificate it signed, all PEM, in a temporary directory.
type Certs struct {
	CAFile                    string
	ServerCertFile, ServerKey string
	ClientCertFile, ClientKey string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCerts makes a fresh CA, server and client certificate, valid for an
// hour, in t's temporary directory.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		CAFile:         filepath.Join(dir, "ca.crt"),
		ServerCertFile: filepath.Join(dir, "server.crt"),
		ServerKey:      filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKey:      filepath.Join(dir, "client.key"),
		pool:           x509.NewCertPool(),
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER := sign(t, caTmpl, caTmpl, caKey, caKey)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("redistest: parse the CA certificate: %v", err)
	}
	c.pool.AddCert(ca)
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)

	for i, leaf := range []struct {
		certFile, keyFile string
		tmpl              *x509.Certificate
	}{
		{c.ServerCertFile, c.ServerKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "127.0.0.1"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:    []string{"localhost"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{c.ClientCertFile, c.ClientKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "dlock test client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	} {
		leaf.tmpl.SerialNumber = big.NewInt(int64(i + 2))
		leaf.tmpl.NotBefore, leaf.tmpl.NotAfter = caTmpl.NotBefore, caTmpl.NotAfter
		leaf.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		key := newKey(t)
		writePEM(t, leaf.certFile, "CERTIFICATE", sign(t, leaf.tmpl, ca, key, caKey))
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatalf("redistest: marshal a key: %v", err)
		}
		writePEM(t, leaf.keyFile, "EC PRIVATE KEY", der)
	}
	c.client, err = tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKey)
	if err != nil {
		t.Fatalf("redistest: load the client certificate: %v", err)
	}
	return c
}

// ClientConfig returns a TLS configuration that trusts the CA and presents
// the client certificate.
func (c *Certs) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{c.client}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: generate a key: %v", err)
	}
	return k
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("redistest: sign %q: %v", tmpl.Subject.CommonName, err)
	}
	return der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", path, err)
	}
}

// TLSClients is a tls-auth-clients setting of the server: whether it asks
// clients for a certificate.
type TLSClients string

// The tls-auth-clients settings.
const (
	ClientCertRequired TLSClients = "yes"
	ClientCertOptional TLSClients = "optional"
	ClientCertIgnored  TLSClients = "no"
)

// WithTLS makes the Server speak TLS only: its port (Addr, Port) is a
// tls-port serving certs' server certificate, and the plain port is off.
// auth says whether clients must present a certificate signed by certs'
// CA. The Server's own client (Do, the readiness check) presents one.
func WithTLS(certs *Certs, auth TLSClients) Option {
	return func(c *config) { c.tls, c.tlsAuth = certs, auth }
}
