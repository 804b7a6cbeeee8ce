package dlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/redlock"
	"github.com/dlockgo/dlock/single"
)

// Strategies and clients a Config can name.
const (
	StrategySingle = "single" // one server: package single
	StrategyQuorum = "quorum" // Redlock across N masters: package redlock

	ClientGoRedis  = "go-redis"  // github.com/redis/go-redis/v9
	ClientValkeyGo = "valkey-go" // github.com/valkey-io/valkey-go
)

// Config chooses a strategy and the servers it runs on. The zero values of
// its optional fields select the defaults.
type Config struct {
	// Strategy is StrategySingle (the default when empty) or StrategyQuorum.
	Strategy string
	// Addrs are the servers, as host:port: exactly one for single, the N
	// independent masters for quorum.
	Addrs []string
	// TTL is the default lease TTL; 0 keeps the strategy's default (30s).
	TTL time.Duration
	// IdleTTL is how long a key's fencing counter outlives the last lease
	// on it, after which it expires from the servers (single.WithIdleTTL,
	// redlock.WithIdleTTL); 0 keeps the default, a day; a negative value
	// keeps it for ever.
	IdleTTL time.Duration
	// Client is ClientGoRedis (the default when empty) or ClientValkeyGo.
	Client string
	// Username and Password authenticate to every server (AUTH); empty
	// for none.
	Username, Password string
	// DB is the database every server selects.
	DB int
	// DialTimeout bounds each connection attempt; 0 keeps the client's
	// default.
	DialTimeout time.Duration

	// DurableNodes declares, for the quorum strategy, that no server ever
	// loses an acknowledged write (AOF with appendfsync always, and no
	// flush): redlock's lost-data guard is off, so fresh servers vote at
	// once (redlock.WithDurableNodes).
	DurableNodes bool
	// NodeTimeout bounds each call to one server of a quorum; 0 keeps
	// redlock.DefaultNodeTimeout. It must be below half the TTL.
	NodeTimeout time.Duration
	// MaxTTL is how long a quorum server that lost its data sits out
	// before it is repaired and votes again; 0 keeps the TTL. It must be at
	// least the TTL; it is not used with DurableNodes (redlock.WithMaxTTL).
	MaxTTL time.Duration

	// Observer hears about acquisitions, a quorum's votes, and each lease's
	// renewals, loss and release; nil for none. It must not block.
	Observer lease.Observer
}

// Open builds the clients for cfg's servers and a Locker of cfg's strategy
// over them. The Locker owns those clients: its Close closes them. With the
// single strategy, Open checks with ctx that the server answers; a quorum
// keeps working with a minority of its servers down, so Open does not
// require them to answer. A bad Config is reported as an *lease.ArgError
// naming the field.
func Open(ctx context.Context, cfg Config) (Locker, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	o := &opened{}
	for _, addr := range cfg.Addrs {
		n, c, err := cfg.dial(addr)
		if err != nil {
			o.closeAll()
			return nil, err
		}
		o.nodes = append(o.nodes, n)
		o.clients = append(o.clients, c)
	}
	if cfg.Strategy == "" || cfg.Strategy == StrategySingle {
		if err := o.ping(ctx); err != nil {
			o.closeAll()
			return nil, err
		}
	}
	var err error
	switch cfg.Strategy {
	case "", StrategySingle:
		var opts []single.Option
		if cfg.TTL != 0 {
			opts = append(opts, single.WithTTL(cfg.TTL))
		}
		if cfg.IdleTTL != 0 {
			opts = append(opts, single.WithIdleTTL(cfg.IdleTTL))
		}
		if cfg.Observer != nil {
			opts = append(opts, single.WithObserver(cfg.Observer))
		}
		o.Locker, err = single.New(o.nodes[0], opts...)
	case StrategyQuorum:
		var opts []redlock.Option
		if cfg.TTL != 0 {
			opts = append(opts, redlock.WithTTL(cfg.TTL))
		}
		if cfg.IdleTTL != 0 {
			opts = append(opts, redlock.WithIdleTTL(cfg.IdleTTL))
		}
		if cfg.DurableNodes {
			opts = append(opts, redlock.WithDurableNodes())
		}
		if cfg.NodeTimeout != 0 {
			opts = append(opts, redlock.WithNodeTimeout(cfg.NodeTimeout))
		}
		if cfg.MaxTTL != 0 {
			opts = append(opts, redlock.WithMaxTTL(cfg.MaxTTL))
		}
		if cfg.Observer != nil {
			opts = append(opts, redlock.WithObserver(cfg.Observer))
		}
		o.Locker, err = redlock.New(o.nodes, opts...)
	}
	if err != nil {
		o.closeAll()
		return nil, err
	}
	return o, nil
}

func (cfg *Config) check() error {
	switch cfg.Strategy {
	case "", StrategySingle:
		if len(cfg.Addrs) > 1 {
			return &lease.ArgError{Arg: "Config.Addrs", Value: cfg.Addrs, Rule: "must hold exactly one address for strategy \"single\""}
		}
	case StrategyQuorum:
	default:
		return &lease.ArgError{Arg: "Config.Strategy", Value: cfg.Strategy, Rule: `must be "single" or "quorum"`}
	}
	if len(cfg.Addrs) == 0 {
		return &lease.ArgError{Arg: "Config.Addrs", Value: cfg.Addrs, Rule: "must hold at least one address"}
	}
	seen := make(map[string]bool, len(cfg.Addrs))
	for _, a := range cfg.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return &lease.ArgError{Arg: "Config.Addrs", Value: a, Rule: "must be host:port"}
		}
		if seen[a] {
			return &lease.ArgError{Arg: "Config.Addrs", Value: a, Rule: "must not repeat an address"}
		}
		seen[a] = true
	}
	switch cfg.Client {
	case "", ClientGoRedis, ClientValkeyGo:
	default:
		return &lease.ArgError{Arg: "Config.Client", Value: cfg.Client, Rule: `must be "go-redis" or "valkey-go"`}
	}
	if cfg.TTL != 0 {
		if err := acquire.CheckTTL(cfg.TTL, acquire.DefaultDriftFactor); err != nil {
			var ae *lease.ArgError
			if errors.As(err, &ae) {
				return &lease.ArgError{Arg: "Config.TTL", Value: cfg.TTL, Rule: ae.Rule}
			}
			return err
		}
	}
	if cfg.DB < 0 {
		return &lease.ArgError{Arg: "Config.DB", Value: cfg.DB, Rule: "must be >= 0"}
	}
	if cfg.DialTimeout < 0 {
		return &lease.ArgError{Arg: "Config.DialTimeout", Value: cfg.DialTimeout, Rule: "must be >= 0"}
	}
	return cfg.checkQuorum()
}

// checkQuorum checks the fields that only the quorum strategy uses.
func (cfg *Config) checkQuorum() error {
	if cfg.Strategy != StrategyQuorum {
		switch {
		case cfg.DurableNodes:
			return &lease.ArgError{Arg: "Config.DurableNodes", Value: true, Rule: `applies to strategy "quorum" only`}
		case cfg.NodeTimeout != 0:
			return &lease.ArgError{Arg: "Config.NodeTimeout", Value: cfg.NodeTimeout, Rule: `applies to strategy "quorum" only`}
		case cfg.MaxTTL != 0:
			return &lease.ArgError{Arg: "Config.MaxTTL", Value: cfg.MaxTTL, Rule: `applies to strategy "quorum" only`}
		}
		return nil
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = redlock.DefaultTTL
	}
	if cfg.NodeTimeout < 0 || cfg.NodeTimeout >= ttl/2 {
		return &lease.ArgError{Arg: "Config.NodeTimeout", Value: cfg.NodeTimeout,
			Rule: "must be >= 0 and below half the TTL (" + ttl.String() + ")"}
	}
	if cfg.MaxTTL < 0 || cfg.MaxTTL != 0 && !cfg.DurableNodes && cfg.MaxTTL < ttl {
		return &lease.ArgError{Arg: "Config.MaxTTL", Value: cfg.MaxTTL,
			Rule: "must be >= 0, and 0 or at least the TTL (" + ttl.String() + ")"}
	}
	return nil
}

// dial builds the client for addr and its Node.
func (cfg *Config) dial(addr string) (node.Node, ownedClient, error) {
	if cfg.Client == ClientValkeyGo {
		opt := valkey.ClientOption{
			InitAddress:  []string{addr},
			Username:     cfg.Username,
			Password:     cfg.Password,
			SelectDB:     cfg.DB,
			DisableCache: true, // locks must read the server, never a client-side cache
			// A standalone server, and a client even while it is down:
			// a quorum must open with a minority of its masters away.
			ForceSingleClient: true,
		}
		opt.Dialer.Timeout = cfg.DialTimeout
		c, err := valkey.NewClient(opt)
		if c == nil {
			return nil, nil, fmt.Errorf("dlock: connect to %s: %w", addr, err)
		}
		return valkeygo.New(c), valkeyClient{c}, nil
	}
	c := redis.NewClient(&redis.Options{
		Addr:        addr,
		Username:    cfg.Username,
		Password:    cfg.Password,
		DB:          cfg.DB,
		DialTimeout: cfg.DialTimeout,
		// Cut calls short when the caller's context ends, rather than at
		// the read timeout.
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// A script whose reply was lost is given up by the strategies,
		// once, never sent again behind their back. go-redis's resends,
		// each after redials, would also stretch one attempt against a
		// dead server over seconds: a wait could then end inside it, on
		// the attempt before, which may have found the lock taken rather
		// than the server gone.
		MaxRetries: -1,
	})
	return goredis.New(c), goRedisClient{c}, nil
}

// ownedClient is a client Open built, and so must close.
type ownedClient interface {
	ping(ctx context.Context) error
	close() error
}

type goRedisClient struct{ c *redis.Client }

func (c goRedisClient) ping(ctx context.Context) error { return c.c.Ping(ctx).Err() }
func (c goRedisClient) close() error                   { return c.c.Close() }

type valkeyClient struct{ c valkey.Client }

func (c valkeyClient) ping(ctx context.Context) error {
	return c.c.Do(ctx, c.c.B().Ping().Build()).Error()
}
func (c valkeyClient) close() error { c.c.Close(); return nil }

// opened is a Locker Open built, with the nodes and clients it owns.
type opened struct {
	Locker
	nodes   []node.Node
	clients []ownedClient

	once sync.Once
	err  error
}

func (o *opened) ping(ctx context.Context) error {
	for i, c := range o.clients {
		if err := c.ping(ctx); err != nil {
			return fmt.Errorf("dlock: %s does not answer: %w", o.nodes[i], err)
		}
	}
	return nil
}

// Close closes the Locker, then the nodes and clients Open made. It is safe
// to call more than once.
func (o *opened) Close() error {
	o.once.Do(func() {
		if o.Locker != nil {
			o.err = o.Locker.Close()
		}
		o.err = errors.Join(o.err, o.closeAll())
	})
	return o.err
}

func (o *opened) closeAll() error {
	var errs []error
	for _, n := range o.nodes {
		errs = append(errs, n.Close())
	}
	for _, c := range o.clients {
		errs = append(errs, c.close())
	}
	o.nodes, o.clients = nil, nil
	return errors.Join(errs...)
}

// OpenURL opens a Locker described by a URL:
//
//	redis://[user:password@]host[:port][/db][?ttl=30s&idle_ttl=24h&client=valkey-go&dial_timeout=5s]
//	redlock://[user:password@]host1[:port],host2[:port],...[/db][?...&durable=true&node_timeout=50ms&max_ttl=1m]
//
// redis:// selects the single strategy on one server, redlock:// the quorum
// strategy across the listed masters. The port defaults to 6379. The
// parameters ttl, idle_ttl, client and dial_timeout set Config.TTL,
// IdleTTL, Client and DialTimeout (idle_ttl=forever keeps per-key state
// for ever); durable, node_timeout and max_ttl, for redlock:// only, set
// DurableNodes, NodeTimeout and MaxTTL. A malformed URL or an unknown
// parameter is reported as an *lease.ArgError.
func OpenURL(ctx context.Context, rawURL string) (Locker, error) {
	if err := acquire.CheckContext(ctx); err != nil {
		return nil, err
	}
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

// ParseURL returns the Config that OpenURL would open.
func ParseURL(rawURL string) (Config, error) {
	bad := func(rule string) (Config, error) {
		return Config{}, &lease.ArgError{Arg: "url", Value: redactURL(rawURL), Rule: rule}
	}
	var cfg Config
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return bad("must start with redis:// or redlock://")
	}
	switch scheme {
	case "redis":
		cfg.Strategy = StrategySingle
	case "redlock":
		cfg.Strategy = StrategyQuorum
	default:
		return bad("scheme must be redis or redlock")
	}
	rest, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(hosts, "@"); i >= 0 {
		user, pass, hasPass := strings.Cut(hosts[:i], ":")
		var err1, err2 error
		cfg.Username, err1 = url.PathUnescape(user)
		if hasPass {
			cfg.Password, err2 = url.PathUnescape(pass)
		}
		if err1 != nil || err2 != nil {
			return bad("user and password must be percent-encoded")
		}
		hosts = hosts[i+1:]
	}
	if hosts == "" {
		return bad("must name a host")
	}
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			return bad("must not hold an empty host")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "6379")
			if _, _, err := net.SplitHostPort(h); err != nil {
				return bad("hosts must be host or host:port")
			}
		}
		cfg.Addrs = append(cfg.Addrs, h)
	}
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return bad("path must be a database number")
		}
		cfg.DB = db
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: " + err.Error())
	}
	known := "ttl, idle_ttl, client, dial_timeout"
	if cfg.Strategy == StrategyQuorum {
		known += ", durable, node_timeout, max_ttl"
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		quorumOnly := k == "durable" || k == "node_timeout" || k == "max_ttl"
		if quorumOnly && cfg.Strategy != StrategyQuorum {
			return bad("parameter " + strconv.Quote(k) + " is for redlock:// URLs only")
		}
		switch k {
		case "idle_ttl":
			if v == "forever" {
				cfg.IdleTTL = -1
				break
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return bad("idle_ttl must be a duration such as 24h, or forever")
			}
			cfg.IdleTTL = d
		case "ttl", "dial_timeout", "node_timeout", "max_ttl":
			d, err := time.ParseDuration(v)
			if err != nil {
				return bad(k + " must be a duration such as 30s")
			}
			switch k {
			case "ttl":
				cfg.TTL = d
			case "dial_timeout":
				cfg.DialTimeout = d
			case "node_timeout":
				cfg.NodeTimeout = d
			default:
				cfg.MaxTTL = d
			}
		case "durable":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("durable must be true or false")
			}
			cfg.DurableNodes = b
		case "client":
			cfg.Client = v
		default:
			return bad("unknown parameter " + strconv.Quote(k) + " (known: " + known + ")")
		}
	}
	return cfg, nil
}

// redactURL hides a password before the URL goes into an error.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	i := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@")
	if i < 0 {
		return raw
	}
	if user, _, hasPass := strings.Cut(rest[:i], ":"); hasPass {
		return scheme + "://" + user + ":xxxxx" + rest[i:]
	}
	return raw
}
