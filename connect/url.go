package connect

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/tlsfiles"
	"github.com/dlockgo/dlock/lease"
)

// schemes are the URL schemes OpenURL knows, by what they select.
var schemes = map[string]struct {
	strategy          string
	tls               bool
	sentinel, cluster bool
}{
	"redis":           {strategy: StrategySingle},
	"rediss":          {strategy: StrategySingle, tls: true},
	"quorum":          {strategy: StrategyQuorum},
	"quorums":         {strategy: StrategyQuorum, tls: true},
	"redlock":         {strategy: StrategyQuorum}, // the old name of quorum://
	"redlocks":        {strategy: StrategyQuorum, tls: true},
	"redis+sentinel":  {strategy: StrategySingle, sentinel: true},
	"rediss+sentinel": {strategy: StrategySingle, tls: true, sentinel: true},
	"redis+cluster":   {strategy: StrategySingle, cluster: true},
	"rediss+cluster":  {strategy: StrategySingle, tls: true, cluster: true},
}

const schemeList = "redis, rediss, quorum, quorums, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster"

// ParseURL returns the Config a URL describes (dlock.OpenURL opens it):
//
//	redis://[user:password@]host[:port][/db][?param=value&...]
//	rediss://...                  the same over TLS
//	quorum://[user:password@]host1[:port],host2[:port],...[/db][?...]
//	quorums://...                 the same over TLS
//	redis+sentinel://[user:password@]sentinel1[:port],sentinel2[:port],.../master[/db][?...]
//	rediss+sentinel://...         the same over TLS
//	redis+cluster://[user:password@]node1[:port],node2[:port],...[?...]
//	rediss+cluster://...          the same over TLS
//
// redis:// selects the single strategy on one server; quorum:// the quorum
// strategy across the listed masters; redis+sentinel:// the single strategy
// on the master that the listed Sentinels name (Config.SentinelMaster),
// following it across failovers; redis+cluster:// the single strategy on a
// Redis Cluster, given by one or more of its nodes (Config.Cluster). A
// scheme with a second s (rediss, quorums) speaks TLS to every server,
// Sentinels included (Config.TLS). The port defaults to 6379, 26379 for a
// Sentinel. user and password authenticate to the servers that hold the
// locks, not to the Sentinels. redlock:// and redlocks://, the quorum's
// schemes before it took the strategy's name, are read as quorum:// and
// quorums://.
//
// Parameters, for every scheme: ttl, idle_ttl, client and dial_timeout set
// Config.TTL, IdleTTL, Client and DialTimeout (idle_ttl=forever keeps
// per-key state for ever). For quorum:// only: durable, node_timeout and
// max_ttl set DurableNodes, NodeTimeout and MaxTTL. For the single
// strategy's schemes: replicas and replica_timeout set Replicas and
// ReplicaTimeout. For redis+sentinel:// only: sentinel_username and
// sentinel_password authenticate to the Sentinels. For the TLS schemes
// only: tls_ca (a PEM file of the certificates to trust instead of the
// system's), tls_cert and tls_key (the client's certificate and key, PEM
// files, both or neither) and tls_server_name (the name the servers'
// certificates carry, when it is not the host dialled). ParseURL reads
// those files. A malformed URL, an unknown parameter or an unreadable file
// is reported as an *lease.ArgError.
func ParseURL(rawURL string) (Config, error) {
	bad := func(rule string) (Config, error) {
		return Config{}, &lease.ArgError{Arg: "url", Value: redactURL(rawURL), Rule: rule}
	}
	var cfg Config
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return bad("must start with a scheme: " + schemeList)
	}
	sc, ok := schemes[scheme]
	if !ok {
		return bad("scheme must be " + schemeList)
	}
	cfg.Strategy, cfg.Cluster = sc.strategy, sc.cluster
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
	defaultPort := "6379"
	if sc.sentinel {
		defaultPort = "26379"
	}
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			return bad("must not hold an empty host")
		}
		if _, port, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
			if _, _, err := net.SplitHostPort(h); err != nil {
				return bad("hosts must be host or host:port")
			}
		} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return bad("a port must be a number from 1 to 65535")
		}
		cfg.Addrs = append(cfg.Addrs, h)
	}
	switch {
	case sc.sentinel:
		master, db, hasDB := strings.Cut(path, "/")
		m, err := url.PathUnescape(master)
		if err != nil || m == "" {
			return bad("path must name the master the Sentinels monitor: /master[/db]")
		}
		cfg.SentinelMaster, path = m, db
		if hasDB && db == "" {
			return bad("path must be /master or /master/db")
		}
	case sc.cluster && path != "":
		return bad("a cluster has only database 0: no /db path")
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
	// Which parameters a scheme takes, and the schemes to name when one
	// is given to another.
	groups := []struct {
		params []string
		ok     bool
		where  string
	}{
		{[]string{"ttl", "idle_ttl", "client", "dial_timeout"}, true, ""},
		{[]string{"durable", "node_timeout", "max_ttl"}, cfg.Strategy == StrategyQuorum, "quorum:// and quorums:// URLs"},
		{[]string{"replicas", "replica_timeout"}, cfg.Strategy == StrategySingle, "the single strategy's URLs, not quorum://"},
		{[]string{"sentinel_username", "sentinel_password"}, sc.sentinel, "redis+sentinel:// and rediss+sentinel:// URLs"},
		{[]string{"tls_ca", "tls_cert", "tls_key", "tls_server_name"}, sc.tls, "the TLS schemes (rediss://, quorums://, rediss+sentinel://, rediss+cluster://)"},
	}
	var known []string
	for _, g := range groups {
		if g.ok {
			known = append(known, g.params...)
		}
	}
	var files tlsfiles.Files
	for k, vs := range q {
		v := vs[len(vs)-1]
		for _, g := range groups {
			if !g.ok && slices.Contains(g.params, k) {
				return bad("parameter " + strconv.Quote(k) + " is for " + g.where + " only")
			}
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
		case "ttl", "dial_timeout", "node_timeout", "max_ttl", "replica_timeout":
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
			case "replica_timeout":
				cfg.ReplicaTimeout = d
			default:
				cfg.MaxTTL = d
			}
		case "durable":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("durable must be true or false")
			}
			cfg.DurableNodes = b
		case "replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad("replicas must be a number >= 0")
			}
			cfg.Replicas = n
		case "client":
			cfg.Client = v
		case "sentinel_username":
			cfg.SentinelUsername = v
		case "sentinel_password":
			cfg.SentinelPassword = v
		case "tls_ca":
			files.CA = v
		case "tls_cert":
			files.Cert = v
		case "tls_key":
			files.Key = v
		case "tls_server_name":
			files.ServerName = v
		default:
			return bad("unknown parameter " + strconv.Quote(k) + " (known: " + strings.Join(known, ", ") + ")")
		}
	}
	if sc.tls {
		if cfg.TLS, err = files.Config(); err != nil {
			return bad("TLS: " + err.Error())
		}
	}
	// Each part may be well formed and the whole still not a Config that
	// Open takes (ttl=1ns, replicas without replica_timeout, a repeated
	// host): say so here, in the URL's words, not at Open in the
	// Config's.
	if err := cfg.check(); err != nil {
		var ae *lease.ArgError
		if !errors.As(err, &ae) {
			return Config{}, err
		}
		rule := paramNames.Replace(ae.Arg) + " " + paramNames.Replace(ae.Rule)
		if ae.Arg == "Config.Addrs" {
			rule = fmt.Sprintf("hosts %v %s", ae.Value, ae.Rule)
		}
		return bad(rule)
	}
	return cfg, nil
}

// paramNames names the Config fields a URL sets by the URL's parameters,
// for the errors of Config.check on a Config that ParseURL built.
var paramNames = strings.NewReplacer(
	"Config.TTL", "ttl", "Config.IdleTTL", "idle_ttl", "Config.Client", "client",
	"Config.DialTimeout", "dial_timeout", "Config.DurableNodes", "durable",
	"Config.NodeTimeout", "node_timeout", "Config.MaxTTL", "max_ttl",
	"Config.ReplicaTimeout", "replica_timeout", "Config.Replicas", "replicas",
	"Config.SentinelMaster", "the Sentinels' master", "Config.SentinelPassword", "sentinel_password",
	"Config.Addrs", "hosts", "Config.DB", "the /db path", "Config.Cluster", "the cluster scheme",
	"Config.Strategy", "the scheme",
)

// redactURL hides the passwords, in the user part and in
// sentinel_password, before the URL goes into an error.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	rest, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); i >= 0 {
		if user, _, hasPass := strings.Cut(rest[:i], ":"); hasPass {
			rest = user + ":xxxxx" + rest[i:]
		}
	}
	if hasQuery {
		params := strings.Split(query, "&")
		for i, p := range params {
			if k, _, ok := strings.Cut(p, "="); ok && k == "sentinel_password" {
				params[i] = k + "=xxxxx"
			}
		}
		rest += "?" + strings.Join(params, "&")
	}
	return scheme + "://" + rest
}
