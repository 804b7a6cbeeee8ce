package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/tlsfiles"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// defaultURL is used when neither flags, $DLOCK_URL nor a config file name
// servers, as redis-cli does.
const defaultURL = "redis://127.0.0.1:6379"

// connFlags are the flags that say where the locks live, and with which
// settings.
type connFlags struct {
	url, strategy, addrs, file string

	tls      bool
	tlsFiles tlsfiles.Files

	// settings are the flags of the table's settings (settings.InFlag),
	// in its order: each given replaces the setting of the servers'
	// source.
	settings []*settingFlag
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "", "servers as a URL: redis://host:port[/db] (single), quorum://h1:p1,h2:p2,h3:p3 (quorum), "+
		"redis+sentinel://s1,s2,s3/master, redis+cluster://n1,n2; rediss://, quorums://, rediss+sentinel://, rediss+cluster:// for TLS")
	fs.StringVar(&c.addrs, "addrs", "", "servers as host:port,host:port,... (with --strategy)")
	fs.StringVar(&c.strategy, "strategy", "", `"single" (one server, the default) or "quorum" (Redlock across --addrs)`)
	fs.StringVar(&c.file, "config", "", "read the servers and settings from FILE, key=value lines: url, or addrs and strategy; "+
		strings.Join(fileKeys(), ", "))
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (a URL says it by its scheme: rediss://, quorums://, ...)")
	fs.StringVar(&c.tlsFiles.CA, "tls-ca", "", "with TLS, trust the CA certificates in this PEM `file` instead of the system's (implies --tls)")
	fs.StringVar(&c.tlsFiles.Cert, "tls-cert", "", "with TLS, present the client certificate in this PEM `file`, with --tls-key (implies --tls)")
	fs.StringVar(&c.tlsFiles.Key, "tls-key", "", "the client certificate's key, a PEM `file` (implies --tls)")
	fs.StringVar(&c.tlsFiles.ServerName, "tls-server-name", "", "with TLS, the `name` the servers' certificates carry, when not the host dialled (implies --tls)")
	for i := range settings.Table {
		if s := &settings.Table[i]; s.Layers&settings.InFlag != 0 {
			f := &settingFlag{s: s}
			fs.Var(f, s.Flag(), s.Doc)
			c.settings = append(c.settings, f)
		}
	}
}

// describeFlag gives id's flag, registered on fs, the usage and the default
// text of a subcommand where it means more than the table's Doc says.
func describeFlag(fs *flag.FlagSet, id settings.ID, usage, def string) {
	f := fs.Lookup(settings.Of(id).Flag())
	f.Usage, f.DefValue = usage, def
}

// given returns the value of id's flag, and whether the command line gave
// it.
func (c *connFlags) given(id settings.ID) (any, bool) {
	for _, f := range c.settings {
		if f.s.ID == id {
			return f.v, f.v != nil
		}
	}
	return nil, false
}

// settingFlag is the flag of a setting of the table: it reads its text as
// the URL's parameter is read, with the same *lease.ArgError for a bad
// value, and prints the table's default.
type settingFlag struct {
	s *settings.Setting
	v any // the value given; nil when the flag was not
}

func (f *settingFlag) String() string {
	switch {
	case f.s == nil:
		return "" // the zero flag, which flag.PrintDefaults compares with
	case f.v == nil:
		return f.s.Default
	}
	return f.s.Format(f.v)
}

func (f *settingFlag) Set(text string) error {
	v, err := f.s.Parse(text)
	if err == nil {
		f.v = v
	}
	return err
}

// IsBoolFlag lets a bool setting's flag stand alone: --durable.
func (f *settingFlag) IsBoolFlag() bool { return f.s != nil && f.s.Kind == settings.KindBool }

// fileKeys are the config file's keys for settings, in the table's order.
func fileKeys() []string {
	var keys []string
	for _, s := range settings.Table {
		if s.Layers&settings.InFile != 0 {
			keys = append(keys, s.Param)
		}
	}
	return keys
}

// usageError is a mistake of the caller's: flags, arguments, configuration.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// resolve returns the Config the flags, the environment and the config file
// describe, checked, and where it came from. The command line wins over
// the environment: --url, --addrs or --config FILE (one of them: two are
// a usage error), then $DLOCK_URL, then defaultURL; the settings' flags
// given (--ttl, --client, ...) replace those of whichever wins.
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
	for _, f := range c.settings {
		if f.v != nil {
			f.s.Set(&cfg, f.v)
		}
	}
	if c.tls || c.tlsFiles != (tlsfiles.Files{}) {
		// The flags' TLS settings replace those of the URL or file.
		if cfg.TLS, err = c.tlsFiles.Config(); err != nil {
			return cfg, "", usagef("--tls: %v", err)
		}
	}
	if err := cfg.Check(); err != nil {
		// Blame the flag when one gave the setting, else the source.
		var ae *lease.ArgError
		if errors.As(err, &ae) {
			if s := settings.Named(ae.Arg); s != nil {
				if _, ok := c.given(s.ID); ok {
					source = "--" + s.Flag()
				}
			}
		}
		return cfg, "", usagef("%s: %v", source, err)
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
// # are skipped. A url line and addrs/strategy lines are exclusive; a
// setting's key (fileKeys) given replaces that setting of the url.
func readConfigFile(path string) (dlock.Config, error) {
	var cfg dlock.Config
	f, err := os.Open(path)
	if err != nil {
		return cfg, err
	}
	defer f.Close()
	type given struct {
		s *settings.Setting
		v any
	}
	var (
		url string
		set []given
	)
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
			continue
		case "addrs":
			cfg.Addrs = splitList(v)
			continue
		case "strategy":
			cfg.Strategy = v
			continue
		}
		i := slices.IndexFunc(settings.Table, func(s settings.Setting) bool { return s.Layers&settings.InFile != 0 && s.Param == k })
		if i < 0 {
			return cfg, fmt.Errorf("line %d: unknown key %q (known: url, addrs, strategy, %s)", n, k, strings.Join(fileKeys(), ", "))
		}
		s := &settings.Table[i]
		val, err := s.Parse(v)
		if err != nil {
			return cfg, fmt.Errorf("line %d: %w", n, err)
		}
		set = append(set, given{s, val})
	}
	if err := sc.Err(); err != nil {
		return cfg, err
	}
	switch {
	case url == "" && len(cfg.Addrs) == 0:
		return cfg, errors.New("names no servers: set url, or addrs")
	case url != "" && (len(cfg.Addrs) > 0 || cfg.Strategy != ""):
		return cfg, errors.New("url and addrs/strategy name servers twice: give one")
	case url != "":
		if cfg, err = connect.ParseURL(url); err != nil {
			return cfg, err
		}
	}
	for _, g := range set {
		g.s.Set(&cfg, g.v)
	}
	return cfg, nil
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
