package connect

import (
	"crypto/tls"
	"net"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
)

// Strategies and clients a Config can name.
const (
	StrategySingle = "single" // one server: package single
	StrategyQuorum = "quorum" // Redlock across N masters: package quorum

	ClientGoRedis  = "go-redis"  // github.com/redis/go-redis/v9
	ClientValkeyGo = "valkey-go" // github.com/valkey-io/valkey-go
)

// Config chooses a strategy, the servers it runs on and its settings. The
// zero value of each optional field selects its default. The fields from
// TTL on are settings of the one table the options, URLs and the command
// share (see the package doc): a URL parameter, a flag of the command and
// an option of the same name set the same thing, with the same default
// and the same *lease.ArgError for the same bad value.
type Config struct {
	// Strategy is StrategySingle (the default when empty) or StrategyQuorum.
	Strategy string
	// Addrs are the servers, as host:port: exactly one for single, the N
	// independent masters for quorum. Open makes a client for each, and
	// the Locker's Close closes them.
	Addrs []string
	// Nodes are the servers as Nodes the caller built, in place of Addrs,
	// on clients with whatever options the caller chose (node/goredis,
	// node/valkeygo): exactly one for single, the N masters for quorum.
	// The caller keeps them: the Locker uses them until its Close, which
	// leaves them and their clients open for the caller to close after.
	// Client, Username, Password, DB, DialTimeout, TLS, Cluster and the
	// Sentinel fields configure the clients Open makes from Addrs; with
	// Nodes they must be left zero (a Node may be on a cluster or Sentinel
	// client of the caller's).
	Nodes []node.Node

	// TTL is the Locker's lease TTL (option.TTL): 30s when 0.
	TTL time.Duration
	// IdleTTL is how long a key's fencing counter outlives the last lease
	// on it, after which it expires from the servers (option.IdleTTL): a
	// minute when 0; a negative value keeps it for ever.
	IdleTTL time.Duration
	// DriftFactor is the share of each lease's TTL set aside for clock
	// drift, on top of 2ms (option.DriftFactor): 0.01 when 0.
	DriftFactor float64
	// Observer hears about acquisitions, a quorum's votes, and each lease's
	// renewals, loss and release; behind Sentinels, of each failover the
	// Locker's client follows (observe.MasterChanged); nil for none. It must
	// not block.
	Observer observe.Observer
	// Replicas makes every claim of the single strategy wait until that
	// many replicas of its master acknowledged it, for at most
	// ReplicaTimeout, and fail if fewer did (option.Replicas); 0 does
	// not wait. It narrows the window in which a failover loses a claim.
	Replicas       int
	ReplicaTimeout time.Duration
	// DurableNodes declares, for the quorum strategy, that no server ever
	// loses an acknowledged write (AOF with appendfsync always, and no
	// flush): the quorum's lost-data guard is off, so fresh servers vote at
	// once (option.DurableNodes).
	DurableNodes bool
	// NodeTimeout bounds each call to one server of a quorum
	// (option.NodeTimeout): max(50ms, TTL/50) when 0. It must be below
	// half the TTL.
	NodeTimeout time.Duration
	// MaxTTL is how long a quorum server that lost its data sits out
	// before it is repaired and votes again (option.MaxTTL): the TTL when
	// 0. It must be at least the TTL; it is not used with DurableNodes.
	MaxTTL time.Duration

	// Client is ClientGoRedis (the default when empty) or ClientValkeyGo.
	Client string
	// Username and Password authenticate to every server (AUTH); empty
	// for none.
	Username, Password string
	// DB is the database every server selects.
	DB int
	// DialTimeout bounds each connection attempt: 5s when 0.
	DialTimeout time.Duration
	// TLS, when not nil, makes every connection TLS with this
	// configuration: to each server, to a cluster's nodes, to the
	// Sentinels and the master they name. An empty ServerName is filled,
	// per connection, with the host dialled. nil is plain TCP.
	TLS *tls.Config

	// Cluster says that Addrs are nodes of a Redis Cluster (one is enough;
	// more help when one is down): the single strategy runs on a cluster
	// client, each lock on the master that serves its key's slot. DB must
	// be 0. Single strategy only.
	Cluster bool
	// SentinelMaster, when not empty, says that Addrs are Redis Sentinels,
	// and names the master they monitor: the single strategy runs on
	// whichever server they name master, and follows it across failovers.
	// Username, Password and DB apply to the master; SentinelUsername and
	// SentinelPassword, when set, authenticate to the Sentinels. Single
	// strategy only.
	SentinelMaster                     string
	SentinelUsername, SentinelPassword string
}

// Check returns the *lease.ArgError Open and Dial would return for cfg,
// before they reach any server; nil when they take it. Its Arg is the
// field's name: for a setting of the table package option documents
// (TTL, NodeTimeout, Client, …), the setting's name, with its one rule,
// as a URL parameter, the command's flag and the option report it; the
// Locker's rules are checked as single.New or quorum.New checks the same
// options, defaults included, so that a Config Check takes, a strategy
// takes. ParseURL returns only Configs that pass it.
func (cfg *Config) Check() error {
	if len(cfg.Addrs) > 0 && len(cfg.Nodes) > 0 {
		return &lease.ArgError{Arg: "Addrs and Nodes", Value: cfg.Addrs,
			Rule: "exclude each other: give the servers as addresses or as Nodes"}
	}
	switch cfg.Strategy {
	case "", StrategySingle:
		if len(cfg.Addrs) > 1 && !cfg.Cluster && cfg.SentinelMaster == "" {
			return &lease.ArgError{Arg: "Addrs", Value: cfg.Addrs, Rule: "must hold exactly one address for strategy \"single\""}
		}
	case StrategyQuorum:
	default:
		return &lease.ArgError{Arg: "Strategy", Value: cfg.Strategy, Rule: `must be "single" or "quorum"`}
	}
	if len(cfg.Nodes) > 0 {
		if err := cfg.checkNodes(); err != nil {
			return err
		}
	} else if err := cfg.checkAddrs(); err != nil {
		return err
	}
	for i := range settings.Table {
		if s := &settings.Table[i]; s.Layers&settings.InConfig != 0 {
			if err := s.Check(s.Get(cfg)); err != nil {
				return err
			}
		}
	}
	if err := cfg.checkTopology(); err != nil {
		return err
	}
	// The strategy's own resolution of the same options: where each
	// applies, the cross rules, and the defaults a Config leaves to it
	// (the node timeout a short TTL leaves no room for, say).
	scope := settings.Single
	if cfg.Strategy == StrategyQuorum {
		scope = settings.Quorum
	}
	_, err := settings.New(scope, settings.Options(cfg))
	return err
}

// checkNodes checks the servers given as Nodes.
func (cfg *Config) checkNodes() error {
	names := make([]string, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		if n == nil {
			return &lease.ArgError{Arg: "Nodes", Value: i, Rule: "must not hold a nil Node (index given)"}
		}
		names[i] = n.String()
	}
	if (cfg.Strategy == "" || cfg.Strategy == StrategySingle) && len(cfg.Nodes) > 1 {
		return &lease.ArgError{Arg: "Nodes", Value: names, Rule: "must hold exactly one Node for strategy \"single\""}
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if seen[name] {
			return &lease.ArgError{Arg: "Nodes", Value: name, Rule: "must not repeat a server"}
		}
		seen[name] = true
	}
	// The connection settings configure the clients Open makes from
	// Addrs: a Node's client is its caller's.
	for i := range settings.Table {
		s := &settings.Table[i]
		if s.Scopes == 0 && s.Layers&settings.InConfig != 0 && !s.Field(cfg).IsZero() {
			return s.Refuse(s.Get(cfg))
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"TLS", cfg.TLS != nil},
		{"Cluster", cfg.Cluster},
		{"SentinelMaster", cfg.SentinelMaster != ""},
	} {
		if f.set {
			return &lease.ArgError{Arg: f.name, Value: names,
				Rule: "configures the clients Open makes from Addrs; with Nodes, set it on your own clients"}
		}
	}
	return nil
}

// checkAddrs checks the servers given as Addrs.
func (cfg *Config) checkAddrs() error {
	if len(cfg.Addrs) == 0 {
		return &lease.ArgError{Arg: "Addrs", Value: cfg.Addrs, Rule: "must hold at least one address"}
	}
	seen := make(map[string]bool, len(cfg.Addrs))
	for _, a := range cfg.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return &lease.ArgError{Arg: "Addrs", Value: a, Rule: "must be host:port"}
		} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return &lease.ArgError{Arg: "Addrs", Value: a, Rule: "must be host:port, the port a number from 1 to 65535"}
		}
		if seen[a] {
			return &lease.ArgError{Arg: "Addrs", Value: a, Rule: "must not repeat an address"}
		}
		seen[a] = true
	}
	return nil
}

// checkTopology checks the fields that say how the single strategy reaches
// its server: a cluster, Sentinels.
func (cfg *Config) checkTopology() error {
	single := cfg.Strategy != StrategyQuorum
	switch {
	case cfg.Cluster && !single:
		return &lease.ArgError{Arg: "Cluster", Value: true, Rule: `applies to strategy "single" only`}
	case cfg.SentinelMaster != "" && !single:
		return &lease.ArgError{Arg: "SentinelMaster", Value: cfg.SentinelMaster, Rule: `applies to strategy "single" only`}
	case cfg.Cluster && cfg.SentinelMaster != "":
		return &lease.ArgError{Arg: "Cluster", Value: true, Rule: "must not be set with SentinelMaster"}
	case cfg.Cluster && cfg.DB != 0:
		return settings.Refuse(settings.DB, cfg.DB)
	case cfg.SentinelMaster == "" && cfg.SentinelUsername != "":
		return settings.Refuse(settings.SentinelUsername, cfg.SentinelUsername)
	case cfg.SentinelMaster == "" && cfg.SentinelPassword != "":
		return settings.Refuse(settings.SentinelPassword, cfg.SentinelPassword)
	}
	return nil
}
