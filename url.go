package dlock

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
)

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
		if _, port, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "6379")
			if _, _, err := net.SplitHostPort(h); err != nil {
				return bad("hosts must be host or host:port")
			}
		} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return bad("a port must be a number from 1 to 65535")
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
