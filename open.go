package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/redlock"
	"github.com/dlockgo/dlock/single"
)

// Open builds the clients for cfg's servers and a Locker of cfg's strategy
// over them. The Locker owns those clients: its Close closes them. With the
// single strategy, Open checks with ctx that the server answers (on a
// cluster, that a node answers and its cluster is working); a quorum
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
	var err error
	if cfg.Cluster || cfg.SentinelMaster != "" {
		// One client for every address: a cluster's nodes, or the
		// Sentinels of one master.
		err = o.add(cfg.dialTopology())
	} else {
		for _, addr := range cfg.Addrs {
			if err = o.add(cfg.dial(addr)); err != nil {
				break
			}
		}
	}
	if err != nil {
		o.closeAll()
		return nil, err
	}
	if cfg.Strategy == "" || cfg.Strategy == StrategySingle {
		if err := o.ping(ctx); err != nil {
			o.closeAll()
			return nil, err
		}
	}
	switch cfg.Strategy {
	case "", StrategySingle:
		var opts []single.Option
		if cfg.TTL != 0 {
			opts = append(opts, single.WithTTL(cfg.TTL))
		}
		if cfg.IdleTTL != 0 {
			opts = append(opts, single.WithIdleTTL(cfg.IdleTTL))
		}
		if cfg.Replicas != 0 {
			opts = append(opts, single.WithReplicas(cfg.Replicas, cfg.ReplicaTimeout))
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
			TLSConfig:         cfg.TLS,
			DialCtxFn:         cfg.dialer().dialValkey,
		}
		opt.Dialer.Timeout = cfg.DialTimeout
		c, err := valkey.NewClient(opt)
		if c == nil {
			return nil, nil, fmt.Errorf("dlock: connect to %s: %w", addr, err)
		}
		return valkeygo.New(c), valkeyClient{c: c}, nil
	}
	c := redis.NewClient(cfg.goRedisOptions(addr))
	return goredis.New(c), goRedisClient{c}, nil
}

// goRedisOptions are the options of every go-redis client Open builds; the
// cluster and Sentinel clients copy them (see dialTopology).
func (cfg *Config) goRedisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:        addr,
		Username:    cfg.Username,
		Password:    cfg.Password,
		DB:          cfg.DB,
		DialTimeout: cfg.DialTimeout,
		TLSConfig:   cfg.TLS,
		Dialer:      cfg.dialer().dial,
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
	}
}

// ownedClient is a client Open built, and so must close.
type ownedClient interface {
	ping(ctx context.Context) error
	close() error
}

type goRedisClient struct{ c *redis.Client }

func (c goRedisClient) ping(ctx context.Context) error { return c.c.Ping(ctx).Err() }
func (c goRedisClient) close() error                   { return c.c.Close() }

type valkeyClient struct {
	c       valkey.Client
	cluster bool
}

func (c valkeyClient) ping(ctx context.Context) error {
	if c.cluster {
		return clusterOK(c.c.Do(ctx, c.c.B().ClusterInfo().Build()).ToString())
	}
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

// add keeps a node and its client, or returns the error that made neither.
func (o *opened) add(n node.Node, c ownedClient, err error) error {
	if err != nil {
		return err
	}
	o.nodes = append(o.nodes, n)
	o.clients = append(o.clients, c)
	return nil
}

func (o *opened) ping(ctx context.Context) error {
	for i, c := range o.clients {
		if err := c.ping(ctx); errors.Is(err, errNotCluster) {
			return fmt.Errorf("dlock: %s %w", o.nodes[i], err)
		} else if err != nil {
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
