// Package tlsfiles builds a TLS client configuration from the PEM files a
// URL or the command line names, for the root package and cmd/dlock alike.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names what a TLS client configuration is made of; empty fields are
// left to Go's defaults (the system's roots, no client certificate, the
// dialled host as the server name).
type Files struct {
	CA         string // PEM certificates to trust instead of the system's
	Cert, Key  string // the client's certificate and key, both or neither
	ServerName string // the name the server's certificate must carry
}

// Config reads the files and returns the configuration, TLS 1.2 at least.
// The error names the file at fault.
func (f Files) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		b, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f.CA)
		}
	}
	switch {
	case f.Cert != "" && f.Key != "":
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	return cfg, nil
}
