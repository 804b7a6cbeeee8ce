package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/tlsfiles"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// defaultURL is used when neither flags, $DLOCK_URL nor a config file name
// servers, as redis-cli does.
const defaultURL = "redis://127.0.0.1:6379"

// connFlags are the flags that say where the locks live.
type connFlags struct {
	url, strategy, addrs, client, file string

	tls      bool
	tlsFiles tlsfiles.Files
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "", "servers as a URL: redis://host:port[/db] (single), quorum://h1:p1,h2:p2,h3:p3 (quorum), "+
		"redis+sentinel://s1,s2,s3/master, redis+cluster://n1,n2; rediss://, quorums://, rediss+sentinel://, rediss+cluster:// for TLS")
	fs.StringVar(&c.addrs, "addrs", "", "servers as host:port,host:port,... (with --strategy)")
	fs.StringVar(&c.strategy, "strategy", "", `"single" (one server, the default) or "quorum" (Redlock across --addrs)`)
	fs.StringVar(&c.client, "client", "", `client library: "go-redis" (default) or "valkey-go"`)
	fs.StringVar(&c.file, "config", "", "read url, addrs, strategy, client, username, password, db from FILE (key=value lines)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (a URL says it by its scheme: rediss://, quorums://, ...)")
	fs.StringVar(&c.tlsFiles.CA, "tls-ca", "", "with TLS, trust the CA certificates in this PEM `file` instead of the system's (implies --tls)")
	fs.StringVar(&c.tlsFiles.Cert, "tls-cert", "", "with TLS, present the client certificate in this PEM `file`, with --tls-key (implies --tls)")
	fs.StringVar(&c.tlsFiles.Key, "tls-key", "", "the client certificate's key, a PEM `file` (implies --tls)")
	fs.StringVar(&c.tlsFiles.ServerName, "tls-server-name", "", "with TLS, the `name` the servers' certificates carry, when not the host dialled (implies --tls)")
}

// usageError is a mistake of the caller's: flags, arguments, configuration.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// resolve returns the Config the flags, the environment and the config file
// describe, and where it came from. The command line wins over the
// environment: --url, --addrs or --config FILE (one of them: two are a
// usage error), then $DLOCK_URL, then defaultURL; --client applies to
// whichever wins.
func (c *connFlags) resolve(getenv func(string) string) (dlock.Config, string, error) {
	var (
		cfg    dlock.Config
		source string
		err    error
	)
	switch {
	case c.url != "" && c.addrs != "":
		return cfg, "", usagef("--url and --addrs name servers twice: give one")
	case c.file != "" && (c.url != "" || c.addrs != ""):
		return cfg, "", usagef("--config and --url or --addrs name servers twice: give one")
	case c.url != "" && c.strategy != "":
		return cfg, "", usagef("--strategy goes with --addrs; a URL's scheme chooses it (redis:// or quorum://)")
	case c.url != "":
		cfg, err = connect.ParseURL(c.url)
		source = "--url"
	case c.addrs != "":
		cfg = dlock.Config{Strategy: c.strategy, Addrs: splitList(c.addrs)}
		source = "--addrs"
	case c.strategy != "":
		return cfg, "", usagef("--strategy needs --addrs")
	case c.file != "":
		cfg, err = readConfigFile(c.file)
		source = "--config " + c.file
	case getenv("DLOCK_URL") != "":
		cfg, err = connect.ParseURL(getenv("DLOCK_URL"))
		source = "$DLOCK_URL"
	default:
		cfg, err = connect.ParseURL(defaultURL)
		source = "default"
	}
	if err != nil {
		return cfg, "", &usageError{msg: fmt.Sprintf("%s: %v", source, err)}
	}
	if c.client != "" {
		cfg.Client = c.client
	}
	if c.tls || c.tlsFiles != (tlsfiles.Files{}) {
		// The flags' TLS settings replace those of the URL or file.
		if cfg.TLS, err = c.tlsFiles.Config(); err != nil {
			return cfg, "", usagef("--tls: %v", err)
		}
	}
	switch cfg.Client {
	case "", connect.ClientGoRedis, connect.ClientValkeyGo:
	default:
		return cfg, "", usagef("--client %q: want go-redis or valkey-go", cfg.Client)
	}
	switch cfg.Strategy {
	case "", connect.StrategySingle:
		if len(cfg.Addrs) != 1 && !cfg.Cluster && cfg.SentinelMaster == "" {
			return cfg, "", usagef("%s: strategy single takes exactly one server, got %d", source, len(cfg.Addrs))
		}
	case connect.StrategyQuorum:
	default:
		return cfg, "", usagef("%s: strategy %q: want single or quorum", source, cfg.Strategy)
	}
	return cfg, source, nil
}

// origin says where the servers came from, for messages: the source
// resolve returned, and the $DLOCK_URL it overrode, if one was set.
func origin(source string, getenv func(string) string) string {
	if source != "$DLOCK_URL" && getenv("DLOCK_URL") != "" {
		return source + ", over $DLOCK_URL"
	}
	return source
}

// describe names cfg's strategy, servers and client library, for -v.
func describe(cfg dlock.Config) string {
	strategy, client := cfg.Strategy, cfg.Client
	if strategy == "" {
		strategy = connect.StrategySingle
	}
	if client == "" {
		client = connect.ClientGoRedis
	}
	where := strings.Join(cfg.Addrs, ",")
	switch {
	case cfg.Cluster:
		where = "the cluster of " + where
	case cfg.SentinelMaster != "":
		where = fmt.Sprintf("master %q of the Sentinels %s", cfg.SentinelMaster, where)
	}
	if cfg.TLS != nil {
		where += ", over TLS"
	}
	return fmt.Sprintf("%s on %s (%s)", strategy, where, client)
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readConfigFile reads key=value lines; blank lines and lines starting with
// # are skipped. A url line and addrs/strategy lines are exclusive.
func readConfigFile(path string) (dlock.Config, error) {
	var cfg dlock.Config
	f, err := os.Open(path)
	if err != nil {
		return cfg, err
	}
	defer f.Close()
	var url string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, fmt.Errorf("line %d: want key=value", n)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "url":
			url = v
		case "addrs":
			cfg.Addrs = splitList(v)
		case "strategy":
			cfg.Strategy = v
		case "client":
			cfg.Client = v
		case "username":
			cfg.Username = v
		case "password":
			cfg.Password = v
		case "db":
			if cfg.DB, err = strconv.Atoi(v); err != nil || cfg.DB < 0 {
				return cfg, fmt.Errorf("line %d: db must be a number >= 0", n)
			}
		default:
			return cfg, fmt.Errorf("line %d: unknown key %q (known: url, addrs, strategy, client, username, password, db)", n, k)
		}
	}
	if err := sc.Err(); err != nil {
		return cfg, err
	}
	if url == "" {
		if len(cfg.Addrs) == 0 {
			return cfg, errors.New("names no servers: set url, or addrs")
		}
		return cfg, nil
	}
	if len(cfg.Addrs) > 0 || cfg.Strategy != "" {
		return cfg, errors.New("url and addrs/strategy name servers twice: give one")
	}
	u, err := connect.ParseURL(url)
	if err != nil {
		return cfg, err
	}
	u.Client = cfg.Client
	if cfg.Username != "" || cfg.Password != "" {
		u.Username, u.Password = cfg.Username, cfg.Password
	}
	if cfg.DB != 0 {
		u.DB = cfg.DB
	}
	return u, nil
}

// dialNodes builds one Node per plain host:port of addrs, on the client
// library client names, with the options dlock.Open gives its own: for
// the demo, which runs its own Lockers on servers it started. close
// closes the nodes and their clients.
func dialNodes(addrs []string, client string) (nodes []node.Node, close func()) {
	var closers []func()
	close = func() {
		for _, c := range closers {
			c()
		}
	}
	for _, addr := range addrs {
		var n node.Node
		if client == connect.ClientValkeyGo {
			c, err := valkey.NewClient(valkey.ClientOption{
				InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
			})
			if c == nil {
				// With ForceSingleClient, valkey-go returns a client even
				// while the server is down: none is a bug.
				panic(fmt.Sprintf("dlock demo: valkey-go client for %s: %v", addr, err))
			}
			n = valkeygo.New(c)
			closers = append(closers, func() { _ = n.Close(); c.Close() })
		} else {
			c := redis.NewClient(&redis.Options{
				Addr: addr, ContextTimeoutEnabled: true, DisableIdentity: true,
				MaxRetries: -1, DialerRetries: 1,
			})
			n = goredis.New(c)
			closers = append(closers, func() { _ = n.Close(); _ = c.Close() })
		}
		nodes = append(nodes, n)
	}
	return nodes, close
}
