package connect

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/internal/settings"
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
// The parameters are those of the settings in the package doc's table
// with a URL parameter: ttl, idle_ttl (forever, or any negative duration,
// keeps per-key state for ever), drift_factor, replicas and
// replica_timeout (the single strategy's schemes), durable, node_timeout
// and max_ttl (quorum:// only), client, dial_timeout, and
// sentinel_username and sentinel_password (redis+sentinel:// only, which
// authenticate to the Sentinels). They set the Config's field of the same
// setting, and a bad value, or one the scheme's strategy does not take,
// is the *lease.ArgError Check returns for that field: its Arg is the
// setting's name, its rule the setting's. The TLS schemes also take
// tls_ca (a PEM file of the certificates to trust instead of the
// system's), tls_cert and tls_key (the client's certificate and key, PEM
// files, both or neither) and tls_server_name (the name the servers'
// certificates carry, when it is not the host dialled); ParseURL reads
// those files. A malformed URL, an unknown parameter or an unreadable
// file is an *lease.ArgError whose Arg is "url". A Config ParseURL
// returns passes Check: a URL that parses opens, servers willing.
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
		db := settings.Of(settings.DB)
		v, err := db.Parse(path)
		if err != nil {
			return Config{}, err
		}
		db.Set(&cfg, v)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: " + err.Error())
	}
	var files tlsfiles.Files
	tlsParams := []struct {
		name string
		file *string
	}{{"tls_ca", &files.CA}, {"tls_cert", &files.Cert}, {"tls_key", &files.Key}, {"tls_server_name", &files.ServerName}}
	// In order, so that of two bad parameters the same one is reported.
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k][len(q[k])-1]
		if i := slices.IndexFunc(tlsParams, func(p struct {
			name string
			file *string
		}) bool {
			return p.name == k
		}); i >= 0 {
			if !sc.tls {
				return bad("parameter " + strconv.Quote(k) + " is for the TLS schemes (rediss://, quorums://, rediss+sentinel://, rediss+cluster://) only")
			}
			*tlsParams[i].file = v
			continue
		}
		s := param(k)
		if s == nil {
			known := params()
			if sc.tls {
				for _, p := range tlsParams {
					known = append(known, p.name)
				}
			}
			return bad("unknown parameter " + strconv.Quote(k) + " (known: " + strings.Join(known, ", ") + ")")
		}
		val, err := s.Parse(v)
		if err != nil {
			return Config{}, err
		}
		s.Set(&cfg, val)
	}
	if sc.tls {
		if cfg.TLS, err = files.Config(); err != nil {
			return bad("TLS: " + err.Error())
		}
	}
	// Each part may be well formed and the whole still not a Config that
	// Open takes (ttl=1ns, replicas on a quorum, a repeated host): say so
	// here, not at Open.
	if err := cfg.Check(); err != nil {
		var ae *lease.ArgError
		if errors.As(err, &ae) && ae.Arg == "Addrs" {
			return bad(fmt.Sprintf("hosts %v %s", ae.Value, ae.Rule))
		}
		return Config{}, err
	}
	return cfg, nil
}

// param returns the setting whose URL parameter is name, or nil.
func param(name string) *settings.Setting {
	for i := range settings.Table {
		if s := &settings.Table[i]; s.Layers&settings.InURL != 0 && s.Param == name {
			return s
		}
	}
	return nil
}

// params returns the URL parameters of the settings, in the table's order.
func params() []string {
	var names []string
	for _, s := range settings.Table {
		if s.Layers&settings.InURL != 0 {
			names = append(names, s.Param)
		}
	}
	return names
}

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
