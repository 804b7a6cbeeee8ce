package connect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/observe"
)

// dialTopology builds one client for all of cfg.Addrs: a cluster client
// when cfg.Cluster, else a client of the master cfg.SentinelMaster that the
// Sentinels at cfg.Addrs name. Either is one Node to the single strategy:
// the client finds the server each call goes to.
func (cfg *Config) dialTopology() (node.Node, ownedClient, error) {
	if cfg.Client == ClientValkeyGo {
		opt := valkey.ClientOption{
			InitAddress:  cfg.Addrs,
			Username:     cfg.Username,
			Password:     cfg.Password,
			SelectDB:     cfg.DB,
			DisableCache: true, // locks must read the server, never a client-side cache
			// No CLIENT SETINFO, as go-redis's DisableIdentity: a
			// round trip less per connection, and no command that a
			// least-privilege user is refused (docs/deployment.md).
			ClientSetInfo: valkey.DisableClientSetInfo,
			TLSConfig:     cfg.TLS,
			DialCtxFn:     cfg.dialer().dialValkey,
		}
		opt.Dialer.Timeout = cfg.DialTimeout
		if cfg.SentinelMaster != "" {
			opt.Sentinel = valkey.SentinelOption{
				MasterSet: cfg.SentinelMaster,
				Username:  cfg.SentinelUsername,
				Password:  cfg.SentinelPassword,
				TLSConfig: cfg.TLS,
				Dialer:    opt.Dialer,
			}
			if w := cfg.masterWatch(); w != nil {
				// valkey-go dials the Sentinels and the master through
				// the one DialCtxFn, each with a Dialer of its own: the
				// Sentinels' is told apart by a mark that does nothing.
				opt.Sentinel.Dialer.ControlContext = sentinelMark
				dial := opt.DialCtxFn
				opt.DialCtxFn = func(ctx context.Context, addr string, nd *net.Dialer, tc *tls.Config) (net.Conn, error) {
					c, err := dial(ctx, addr, nd, tc)
					if err == nil && nd.ControlContext == nil {
						w.connected(addr)
					}
					return c, err
				}
			}
		}
		c, err := valkey.NewClient(opt)
		if c == nil {
			// valkey-go logs in as it connects: a refusal of the
			// credentials comes here, not at Open's check.
			return nil, nil, pingError(cfg.topologyName(), err)
		}
		return valkeygo.New(c), valkeyClient{c: c, cluster: cfg.Cluster}, nil
	}
	// The go-redis options of a lone server, copied field by field: the
	// three option types share no struct.
	o := cfg.goRedisOptions("")
	if cfg.Cluster {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    cfg.Addrs,
			Username:                 o.Username,
			Password:                 o.Password,
			DialTimeout:              o.DialTimeout,
			TLSConfig:                o.TLSConfig,
			Dialer:                   o.Dialer,
			ContextTimeoutEnabled:    o.ContextTimeoutEnabled,
			DisableIdentity:          o.DisableIdentity,
			MaxRetries:               o.MaxRetries,
			DialerRetries:            o.DialerRetries,
			MaintNotificationsConfig: o.MaintNotificationsConfig,
		})
		return goredis.New(c), goRedisCluster{c}, nil
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            cfg.SentinelMaster,
		SentinelAddrs:         cfg.Addrs,
		SentinelUsername:      cfg.SentinelUsername,
		SentinelPassword:      cfg.SentinelPassword,
		Username:              o.Username,
		Password:              o.Password,
		DB:                    o.DB,
		DialTimeout:           o.DialTimeout,
		TLSConfig:             o.TLSConfig,
		Dialer:                o.Dialer,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		DisableIdentity:       o.DisableIdentity,
		MaxRetries:            o.MaxRetries,
		DialerRetries:         o.DialerRetries,
	})
	if w := cfg.masterWatch(); w != nil {
		c.AddHook(w)
	}
	// go-redis names a failover client "FailoverClient" wherever the
	// Node's name shows: in errors, and in Inspect.
	return named{goredis.New(c), cfg.topologyName()}, goRedisClient{c}, nil
}

// masterWatch reports to an Observer each change of the master that one
// client of a Sentinel group connects to: the failovers that client
// followed. It returns nil when there is no Observer to tell.
func (cfg *Config) masterWatch() *masterWatch {
	if cfg.Observer == nil {
		return nil
	}
	return &masterWatch{obs: cfg.Observer}
}

type masterWatch struct {
	obs  observe.Observer
	mu   sync.Mutex
	addr string // the master connected to last; "" before the first
}

// connected notes a connection made to the master at addr, and reports it
// when the master was another before. The first master is no failover.
func (w *masterWatch) connected(addr string) {
	w.mu.Lock()
	prev := w.addr
	w.addr = addr
	w.mu.Unlock()
	if prev != "" && prev != addr {
		w.obs.Observe(observe.Event{Kind: observe.MasterChanged, Strategy: StrategySingle, Node: addr})
	}
}

// DialHook is where masterWatch sees a go-redis failover client's
// connections: a hook of that client sees only its connections to the
// master, not those of its Sentinel clients, which share its Dialer. The
// address the hook is given is the client's name, not the master's; the
// connection knows where it went.
func (w *masterWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if _, failed := c.(failedConn); err == nil && !failed {
			w.connected(c.RemoteAddr().String())
		}
		return c, err
	}
}

func (w *masterWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (w *masterWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sentinelMark marks the Dialer valkey-go dials Sentinels with. It does
// nothing to the socket.
func sentinelMark(context.Context, string, string, syscall.RawConn) error { return nil }

// named is a Node under another name.
type named struct {
	node.Node
	name string
}

func (n named) String() string { return n.name }

// topologyName names cfg's cluster, or its Sentinels' master, in errors.
func (cfg *Config) topologyName() string {
	if cfg.SentinelMaster != "" {
		return fmt.Sprintf("master %q of the Sentinels %s", cfg.SentinelMaster, strings.Join(cfg.Addrs, ","))
	}
	return strings.Join(cfg.Addrs, ",")
}

// sentinelRefusal returns err, a failure of Open behind Sentinels, or,
// when it is a refusal of credentials that the Sentinels made rather than
// the master, an error that says so. Neither client tells which server
// refused (go-redis reports a Sentinel's refusal as its master's), so the
// Sentinels are asked, with the Sentinel credentials, until one takes
// them (the master refused its own) or refuses them.
func (cfg *Config) sentinelRefusal(ctx context.Context, err error) error {
	if re := replyError(err); cfg.SentinelMaster == "" || re == nil || !errors.Is(re, node.ErrAuth) {
		return err
	}
	for _, addr := range cfg.Addrs {
		o := cfg.goRedisOptions(addr)
		o.Username, o.Password, o.DB = cfg.SentinelUsername, cfg.SentinelPassword, 0
		c := redis.NewSentinelClient(o)
		perr := c.Ping(ctx).Err()
		_ = c.Close()
		if perr == nil {
			return err
		}
		if re := replyError(perr); re != nil && errors.Is(re, node.ErrAuth) {
			return fmt.Errorf("dlock: Sentinel %s refused the Sentinel credentials (sentinel_username, sentinel_password): %w", addr, re)
		}
	}
	return err
}

type goRedisCluster struct{ c *redis.ClusterClient }

func (c goRedisCluster) ping(ctx context.Context) error {
	info, err := c.c.ClusterInfo(ctx).Result()
	return clusterOK(info, err)
}
func (c goRedisCluster) close() error { return c.c.Close() }

// errNotCluster is the answer of a server, to a cluster URL or
// Config.Cluster, that is not a working cluster node.
var errNotCluster = errors.New("is not a node of a working cluster")

// clusterOK turns a CLUSTER INFO reply into errNotCluster when the server
// is not a node of a working cluster: a cluster client on a lone server
// would otherwise run every lock on it without a word.
func clusterOK(info string, err error) error {
	var re interface{ RedisError() }
	var ve *valkey.ValkeyError
	switch {
	case errors.As(err, &re) || errors.As(err, &ve):
		return fmt.Errorf("%w: %w", errNotCluster, err)
	case err != nil:
		return err
	case !strings.Contains(info, "cluster_state:ok"):
		state, _, _ := strings.Cut(info, "\n")
		return fmt.Errorf("%w: %s", errNotCluster, strings.TrimSpace(state))
	}
	return nil
}
