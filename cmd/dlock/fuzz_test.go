package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
)

// checkResolved fails t unless cfg is a setup the command can open: a
// strategy and a client it knows, and servers for it.
func checkResolved(t *testing.T, what string, cfg dlock.Config) {
	t.Helper()
	switch cfg.Client {
	case "", connect.ClientGoRedis, connect.ClientValkeyGo:
	default:
		t.Fatalf("%s: client %q", what, cfg.Client)
	}
	switch cfg.Strategy {
	case "", connect.StrategySingle:
		if len(cfg.Addrs) != 1 && !cfg.Cluster && cfg.SentinelMaster == "" {
			t.Fatalf("%s: single strategy on %d servers", what, len(cfg.Addrs))
		}
	case connect.StrategyQuorum:
		if len(cfg.Addrs) == 0 {
			t.Fatalf("%s: quorum of no servers", what)
		}
	default:
		t.Fatalf("%s: strategy %q", what, cfg.Strategy)
	}
}

// FuzzRunArgs parses any argument list of dlock run (the arguments
// separated by NUL bytes) with any $DLOCK_URL: it is a usage error, or
// a runner with a key, a command and a TTL, on a setup it can open. No
// server is reached.
func FuzzRunArgs(f *testing.F) {
	for _, s := range [][2]string{
		{"--key\x00k\x00--\x00true", ""},
		{"--keys\x00a,b\x00--ttl\x0010s\x00--\x00sh\x00-c\x00exit 0", "quorum://a:1,b:2,c:3"},
		{"--key=k\x00--url=redis://h:1?ttl=5s\x00--\x00x", ""},
		{"--key\x00k\x00--permits\x003\x00--addrs\x00a:1,b:2,c:3\x00--strategy\x00quorum\x00--\x00x", ""},
		{"--key\x00k\x00--shared\x00--exclusive\x00--\x00x", ""},
		{"--key\x00k\x00--client\x00nope\x00--\x00x", ""},
		{"--key\x00k\x00--ttl\x00-1s\x00--\x00x", ""},
		{"--key\x00k\x00--tls-ca\x00/nonexistent\x00--\x00x", ""},
		{"--key\x00k\x00--url\x00redis://h:1\x00--addrs\x00h:2\x00--\x00x", ""},
		{"--key\x00k\x00--config\x00/nonexistent\x00--\x00x", ""},
		{"--help", ""}, {"", ""}, {"--key\x00k\x00--\x00x", "redis://a:1,b:2"},
		{"--keys\x00,\x00--\x00x", ""}, {"--key\x00k\x00--permits\x00-1\x00--\x00x", ""},
		{"--key\x00k\x00--rate\x0010/s\x00--burst\x003\x00--\x00x", "quorum://a:1,b:2,c:3"},
		{"--key\x00k\x00--rate\x005/1h30m\x00--\x00x", ""}, {"--key\x00k\x00--rate\x00/\x00--\x00x", ""},
		{"--key\x00k\x00--metadata\x00" + strings.Repeat("m", 600) + "\x00--\x00x", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, joined, envURL string) {
		args := strings.Split(joined, "\x00")
		getenv := func(k string) string {
			if k == "DLOCK_URL" {
				return envURL
			}
			return ""
		}
		r, cfg, code, ok := parseRun(args, getenv, io.Discard, io.Discard)
		if !ok {
			if code != exitUsage && code != exitOK {
				t.Fatalf("parseRun(%q) = exit %d; want a usage error", args, code)
			}
			return
		}
		if r == nil || r.key == "" || len(r.argv) == 0 || r.ttl <= 0 || r.wait < 0 || r.grace < 0 {
			t.Fatalf("parseRun(%q) = %+v", args, r)
		}
		if r.rate != nil && r.rate.Check() != nil {
			t.Fatalf("parseRun(%q) took the rate %+v: %v", args, *r.rate, r.rate.Check())
		}
		checkResolved(t, "parseRun", cfg)
	})
}

// FuzzConfigFile reads any --config file: it is a usage error, or a setup
// the command can open.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"url=redis://127.0.0.1:6380\n", "addrs=a:1,b:2,c:3\nstrategy=quorum\nclient=valkey-go\n",
		"# comment\n\nurl = quorum://a,b,c?ttl=10s\nusername=u\npassword=p\ndb=2\n",
		"addrs=h:1\ndb=-1\n", "url=redis://h:1\naddrs=h:2\n", "color=red\n", "no equals sign\n",
		"strategy=single\n", "addrs=a:1,b:2\n", "url=redis+cluster://n1\ndb=3\n", "client=x\naddrs=h:1\n",
		"url=\n", "addrs= , ,\n", "db=99999999999999999999\naddrs=h:1\n", strings.Repeat("x", 70000) + "=1\n",
		"strategy=quorum\nurl=redis://h\n", "\x00=\x00\n", "url=redis://h:1\r\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "dlock.conf")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c := connFlags{file: path}
		cfg, _, err := c.resolve(func(string) string { return "" })
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("resolve(config %q) = %v; want a usage error", content, err)
			}
			return
		}
		checkResolved(t, "config "+strings.TrimSpace(content), cfg)
	})
}
