package connect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// Dial checks cfg and returns its servers as Nodes: cfg.Nodes, which the
// caller built and keeps, or else Nodes on clients Dial builds for
// cfg.Addrs, which the Servers own: their Close closes them. With the
// single strategy, Dial checks with ctx that the server answers (on a
// cluster, that a node answers and its cluster is working) and takes the
// credentials (an error matching node.ErrAuth when it refuses them; behind
// Sentinels, when they refuse theirs too, and the error then names the
// Sentinel); a quorum keeps working with a minority of its servers down,
// so Dial does not require them to answer. A bad Config is an
// *lease.ArgError naming the field.
//
// The clients Dial builds report errors through the calls, not on stderr,
// except for what go-redis prints through its process-wide logger, which
// no one client's options reach: chiefly its lines about a Sentinel group
// (the master it selected, each failover). docs/observability.md lists
// them; SetGoRedisLog is the program's opt-in to drop or route them.
func Dial(ctx context.Context, cfg Config) (*Servers, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	s := &Servers{}
	var err error
	if cfg.Cluster || cfg.SentinelMaster != "" {
		// One client for every address: a cluster's nodes, or the
		// Sentinels of one master.
		err = s.add(cfg.dialTopology())
	} else {
		for _, addr := range cfg.Addrs {
			if err = s.add(cfg.dial(addr)); err != nil {
				break
			}
		}
	}
	if err != nil {
		_ = s.Close()
		return nil, cfg.sentinelRefusal(ctx, err)
	}
	s.Nodes = s.made
	if len(cfg.Nodes) > 0 {
		s.Nodes = slices.Clone(cfg.Nodes)
	}
	if cfg.Strategy == "" || cfg.Strategy == StrategySingle {
		if len(cfg.Nodes) > 0 {
			err = ping(ctx, s.Nodes[0])
		} else {
			err = s.ping(ctx)
		}
		if err != nil {
			_ = s.Close()
			return nil, cfg.sentinelRefusal(ctx, err)
		}
	}
	return s, nil
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
			// No CLIENT SETINFO, as go-redis's DisableIdentity: a
			// round trip less per connection, and no command that a
			// least-privilege user is refused (docs/deployment.md).
			ClientSetInfo: valkey.DisableClientSetInfo,
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
		Dialer:      dialQuietly(cfg.dialer().dial),
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
		// One dial per call, as valkey-go makes: go-redis's default of
		// five, 100ms apart, makes a dead server answer in half a second,
		// and a quorum's call end on its node timeout inside the retries.
		DialerRetries: 1,
		// Maintenance notifications are a managed service's push messages;
		// asking a plain server for them costs a round trip per connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// dialQuietly returns dial, except that a dial that fails hands go-redis a
// connection whose every read and write fails with the dial's error. The
// call that wanted the connection fails with that error, as it would have
// anyway; but go-redis's pool, which prints each failed dial through its
// process-wide logger (there is no logger per client, and the one logger
// belongs to the program), sees nothing to print. Nor does it count the
// failure: after as many failed dials as the pool has connections, it
// would fail every call at once, until a background redial, once a
// second, got through: a lock wait would miss the server's return.
func dialQuietly(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return failedConn{err: &dialError{err}, addr: addr}, nil
		}
		return c, nil
	}
}

// dialError keeps a failed dial's error whole: go-redis unwraps a
// *net.OpError that a read or write returns, which would drop the address
// and the "dial" from the message.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// failedConn is a connection that was never made.
type failedConn struct {
	err  error
	addr string
}

func (c failedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c failedConn) Close() error                     { return nil }
func (c failedConn) LocalAddr() net.Addr              { return addrString("") }
func (c failedConn) RemoteAddr() net.Addr             { return addrString(c.addr) }
func (c failedConn) SetDeadline(time.Time) error      { return nil }
func (c failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c failedConn) SetWriteDeadline(time.Time) error { return nil }

type addrString string

func (a addrString) Network() string { return "tcp" }
func (a addrString) String() string  { return string(a) }

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

// pingScript is what Open asks a single server of the caller's Nodes to
// run: with no client of its own to ask, the one question that shows,
// whoever built the client, that the server answers, takes the
// credentials and runs scripts.
var pingScript = node.NewScript("return 1")

func ping(ctx context.Context, n node.Node) error {
	if _, err := n.Eval(ctx, pingScript, nil); err != nil {
		return pingError(n.String(), err)
	}
	return nil
}

// pingError says why the server (or servers) named n failed Open's check.
func pingError(n string, err error) error {
	re := replyError(err)
	switch {
	case re != nil && errors.Is(re, node.ErrAuth):
		return fmt.Errorf("dlock: %s: authentication failed: %w", n, re)
	case errors.Is(err, errNotCluster):
		return fmt.Errorf("dlock: %s %w", n, err)
	case re != nil:
		return fmt.Errorf("dlock: %s refused: %w", n, err)
	}
	return fmt.Errorf("dlock: %s does not answer: %w", n, err)
}

// replyError returns the server's error reply in err as the node adapters
// report one, whichever client said it, or nil when err is not one.
func replyError(err error) *node.ReplyError {
	var (
		re *node.ReplyError
		gr redis.Error
		ve *valkey.ValkeyError
	)
	switch {
	case errors.As(err, &re):
		return re
	case errors.As(err, &gr) && !errors.Is(err, redis.Nil):
		return &node.ReplyError{Msg: gr.Error()}
	case errors.As(err, &ve) && !ve.IsNil():
		return &node.ReplyError{Msg: ve.Error()}
	}
	return nil
}

// Servers are the servers a Config names, as the Nodes a strategy runs
// on, with the clients Dial built for them.
type Servers struct {
	// Nodes are the servers, in the Config's order: one for the single
	// strategy (on a cluster or behind Sentinels, one Node for all of
	// them), the N masters for a quorum. They stay the Servers' (or, from
	// Config.Nodes, the caller's); the slice is the caller's.
	Nodes []node.Node

	made    []node.Node // the Nodes Dial built, which Close closes
	clients []ownedClient
	once    sync.Once
	err     error
}

// add keeps a node and its client, or returns the error that made neither.
func (s *Servers) add(n node.Node, c ownedClient, err error) error {
	if err != nil {
		return err
	}
	s.made = append(s.made, n)
	s.clients = append(s.clients, c)
	return nil
}

func (s *Servers) ping(ctx context.Context) error {
	for i, c := range s.clients {
		if err := c.ping(ctx); err != nil {
			return pingError(s.made[i].String(), err)
		}
	}
	return nil
}

// Close closes the Nodes and clients Dial built (not those of
// Config.Nodes). It is safe to call more than once.
func (s *Servers) Close() error {
	s.once.Do(func() {
		var errs []error
		for _, n := range s.made {
			errs = append(errs, n.Close())
		}
		for _, c := range s.clients {
			errs = append(errs, c.close())
		}
		s.made, s.clients = nil, nil
		s.err = errors.Join(errs...)
	})
	return s.err
}
