package connect

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
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

// Config chooses a strategy and the servers it runs on. The zero values of
// its optional fields select the defaults.
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
	// TTL is the default lease TTL; 0 keeps the strategy's default (30s).
	TTL time.Duration
	// IdleTTL is how long a key's fencing counter outlives the last lease
	// on it, after which it expires from the servers (option.IdleTTL); 0
	// keeps the default, a minute; a negative value keeps it for ever.
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
	// NodeTimeout bounds each call to one server of a quorum; 0 keeps the
	// default (option.NodeTimeout). It must be below half the TTL.
	NodeTimeout time.Duration
	// MaxTTL is how long a quorum server that lost its data sits out
	// before it is repaired and votes again; 0 keeps the TTL. It must be at
	// least the TTL; it is not used with DurableNodes (option.MaxTTL).
	MaxTTL time.Duration

	// Observer hears about acquisitions, a quorum's votes, and each lease's
	// renewals, loss and release; behind Sentinels, of each failover the
	// Locker's client follows (observe.MasterChanged); nil for none. It must
	// not block.
	Observer observe.Observer
}

func (cfg *Config) check() error {
	if len(cfg.Addrs) > 0 && len(cfg.Nodes) > 0 {
		return &lease.ArgError{Arg: "Config.Addrs and Config.Nodes", Value: cfg.Addrs,
			Rule: "exclude each other: give the servers as addresses or as Nodes"}
	}
	switch cfg.Strategy {
	case "", StrategySingle:
		if len(cfg.Addrs) > 1 && !cfg.Cluster && cfg.SentinelMaster == "" {
			return &lease.ArgError{Arg: "Config.Addrs", Value: cfg.Addrs, Rule: "must hold exactly one address for strategy \"single\""}
		}
	case StrategyQuorum:
	default:
		return &lease.ArgError{Arg: "Config.Strategy", Value: cfg.Strategy, Rule: `must be "single" or "quorum"`}
	}
	if len(cfg.Nodes) > 0 {
		if err := cfg.checkNodes(); err != nil {
			return err
		}
	} else if err := cfg.checkAddrs(); err != nil {
		return err
	}
	if cfg.TTL != 0 {
		if err := acquire.CheckTTL(cfg.TTL, settings.DefaultDriftFactor); err != nil {
			var ae *lease.ArgError
			if errors.As(err, &ae) {
				return &lease.ArgError{Arg: "Config.TTL", Value: cfg.TTL, Rule: ae.Rule}
			}
			return err
		}
	}
	if err := cfg.checkTopology(); err != nil {
		return err
	}
	return cfg.checkQuorum()
}

// checkNodes checks the servers given as Nodes.
func (cfg *Config) checkNodes() error {
	names := make([]string, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		if n == nil {
			return &lease.ArgError{Arg: "Config.Nodes", Value: i, Rule: "must not hold a nil Node (index given)"}
		}
		names[i] = n.String()
	}
	if (cfg.Strategy == "" || cfg.Strategy == StrategySingle) && len(cfg.Nodes) > 1 {
		return &lease.ArgError{Arg: "Config.Nodes", Value: names, Rule: "must hold exactly one Node for strategy \"single\""}
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if seen[name] {
			return &lease.ArgError{Arg: "Config.Nodes", Value: name, Rule: "must not repeat a server"}
		}
		seen[name] = true
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Config.Client", cfg.Client != ""},
		{"Config.Username", cfg.Username != ""},
		{"Config.Password", cfg.Password != ""},
		{"Config.DB", cfg.DB != 0},
		{"Config.DialTimeout", cfg.DialTimeout != 0},
		{"Config.TLS", cfg.TLS != nil},
		{"Config.Cluster", cfg.Cluster},
		{"Config.SentinelMaster", cfg.SentinelMaster != ""},
		{"Config.SentinelUsername", cfg.SentinelUsername != ""},
		{"Config.SentinelPassword", cfg.SentinelPassword != ""},
	} {
		if f.set {
			return &lease.ArgError{Arg: f.name, Value: names,
				Rule: "configures the clients Open makes from Config.Addrs; with Config.Nodes, set it on your own clients"}
		}
	}
	return nil
}

// checkAddrs checks the servers given as Addrs, and the clients Open makes
// for them.
func (cfg *Config) checkAddrs() error {
	if len(cfg.Addrs) == 0 {
		return &lease.ArgError{Arg: "Config.Addrs", Value: cfg.Addrs, Rule: "must hold at least one address"}
	}
	seen := make(map[string]bool, len(cfg.Addrs))
	for _, a := range cfg.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return &lease.ArgError{Arg: "Config.Addrs", Value: a, Rule: "must be host:port"}
		} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return &lease.ArgError{Arg: "Config.Addrs", Value: a, Rule: "must be host:port, the port a number from 1 to 65535"}
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
	if cfg.DB < 0 {
		return &lease.ArgError{Arg: "Config.DB", Value: cfg.DB, Rule: "must be >= 0"}
	}
	if cfg.DialTimeout < 0 {
		return &lease.ArgError{Arg: "Config.DialTimeout", Value: cfg.DialTimeout, Rule: "must be >= 0"}
	}
	return nil
}

// checkTopology checks the fields that say how the single strategy reaches
// its server: a cluster, Sentinels, replicas.
func (cfg *Config) checkTopology() error {
	single := cfg.Strategy != StrategyQuorum
	switch {
	case cfg.Cluster && !single:
		return &lease.ArgError{Arg: "Config.Cluster", Value: true, Rule: `applies to strategy "single" only`}
	case cfg.SentinelMaster != "" && !single:
		return &lease.ArgError{Arg: "Config.SentinelMaster", Value: cfg.SentinelMaster, Rule: `applies to strategy "single" only`}
	case cfg.Cluster && cfg.SentinelMaster != "":
		return &lease.ArgError{Arg: "Config.Cluster", Value: true, Rule: "must not be set with Config.SentinelMaster"}
	case cfg.Cluster && cfg.DB != 0:
		return &lease.ArgError{Arg: "Config.DB", Value: cfg.DB, Rule: "must be 0 on a cluster"}
	case (cfg.SentinelUsername != "" || cfg.SentinelPassword != "") && cfg.SentinelMaster == "":
		return &lease.ArgError{Arg: "Config.SentinelPassword", Value: "xxxxx", Rule: "needs Config.SentinelMaster"}
	case cfg.Replicas != 0 && !single:
		return &lease.ArgError{Arg: "Config.Replicas", Value: cfg.Replicas, Rule: `applies to strategy "single" only`}
	case cfg.Replicas < 0:
		return &lease.ArgError{Arg: "Config.Replicas", Value: cfg.Replicas, Rule: "must be >= 0"}
	case cfg.ReplicaTimeout < 0 || cfg.Replicas > 0 && cfg.ReplicaTimeout == 0:
		return &lease.ArgError{Arg: "Config.ReplicaTimeout", Value: cfg.ReplicaTimeout, Rule: "must be > 0 when Config.Replicas is"}
	case cfg.ReplicaTimeout != 0 && cfg.Replicas == 0:
		return &lease.ArgError{Arg: "Config.ReplicaTimeout", Value: cfg.ReplicaTimeout, Rule: "needs Config.Replicas"}
	}
	return nil
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
		ttl = settings.DefaultTTL
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
