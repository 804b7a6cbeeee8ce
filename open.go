package dlock

import (
	"context"
	"errors"
	"sync"

	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

// Config chooses a strategy, the servers it runs on and its settings; its
// zero values select the defaults. Package connect documents its fields
// and ParseURL the URL that fills it.
type Config = connect.Config

// Open returns a Client of cfg's strategy over cfg's servers (see
// connect.Dial, which builds and checks them), with cfg's settings as
// the options of the same name. A bad Config is the *lease.ArgError
// cfg.Check returns, naming the field.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	srv, err := connect.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{servers: srv, strategy: cfg.Strategy}
	// Every setting cfg holds, as the options of the same name.
	opts := settings.Options(&cfg)
	switch cfg.Strategy {
	case "", connect.StrategySingle:
		c.strategy = connect.StrategySingle
		c.lk, err = single.New(srv.Nodes[0], opts...)
	case connect.StrategyQuorum:
		c.lk, err = quorum.New(srv.Nodes, opts...)
	}
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	return c, nil
}

// OpenURL opens the Client a URL describes: redis://host:port for the
// single strategy, quorum://h1,h2,h3 for a quorum, and the TLS, Sentinel
// and Cluster forms connect.ParseURL lists, with their parameters.
func OpenURL(ctx context.Context, rawURL string) (*Client, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	cfg, err := connect.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

// Client is the Locker Open returns: a single.Locker or a quorum.Locker,
// as its Config chose, over the servers it names, with every capability
// both strategies have. Its methods are those strategies'; their docs
// give the contracts. It is safe for concurrent use.
type Client struct {
	lk       strategy
	servers  *connect.Servers
	strategy string

	once sync.Once
	err  error
}

// strategy is what both of dlock's strategies' Lockers are.
type strategy interface {
	Locker
	AcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error)
	TryAcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error)
	Resume(ctx context.Context, handle string, opts ...option.Option) (*lease.Lease, error)
	ForceRelease(ctx context.Context, key string) (lease.Broken, error)
	Publish(ctx context.Context, key, message string) error
	Watch(ctx context.Context, key string) (messages <-chan string, stop func(), err error)
}

var (
	_ strategy = (*single.Locker)(nil)
	_ strategy = (*quorum.Locker)(nil)
)

// Acquire waits until the lock on key is granted, or ctx ends: see Locker.
func (c *Client) Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return c.lk.Acquire(ctx, key, opts...)
}

// TryAcquire makes one attempt at the lock on key: see Locker.
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error) {
	return c.lk.TryAcquire(ctx, key, opts...)
}

// AcquireAll waits until every one of keys is granted, as one lease, or
// ctx ends: all or nothing, a token per key (lease.Lease.Keys), and no
// deadlock between callers asking for overlapping sets in any order.
func (c *Client) AcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return c.lk.AcquireAll(ctx, keys, opts...)
}

// TryAcquireAll makes one attempt at every one of keys, as AcquireAll.
func (c *Client) TryAcquireAll(ctx context.Context, keys []string, opts ...option.Option) (*lease.Lease, error) {
	return c.lk.TryAcquireAll(ctx, keys, opts...)
}

// Inspect reports who holds the lock on key: see Locker.
func (c *Client) Inspect(ctx context.Context, key string) (lease.Info, error) {
	return c.lk.Inspect(ctx, key)
}

// Resume takes up the lease a handle names (the text of lease.Handle,
// written out by lease.Lease.Handle, perhaps in another process), once the
// servers say it is still held with the handle's token: an error matching
// ErrNotHeld says it is not, ErrForeignHandle that another Locker's
// servers granted it.
func (c *Client) Resume(ctx context.Context, handle string, opts ...option.Option) (*lease.Lease, error) {
	return c.lk.Resume(ctx, handle, opts...)
}

// ForceRelease is an operator's break: it ends whatever lease holds the
// lock on key and raises the key's fencing token above the old holder's,
// so that a fence shown Broken.Token refuses the old holder's late writes.
func (c *Client) ForceRelease(ctx context.Context, key string) (lease.Broken, error) {
	return c.lk.ForceRelease(ctx, key)
}

// Publish sends message to every Watch of key, on the lock's servers.
func (c *Client) Publish(ctx context.Context, key, message string) error {
	return c.lk.Publish(ctx, key, message)
}

// Watch delivers the messages published for key from now on, until stop
// is called. Delivery is a hint: messages coalesce, and one published
// while a connection is broken is lost.
func (c *Client) Watch(ctx context.Context, key string) (messages <-chan string, stop func(), err error) {
	return c.lk.Watch(ctx, key)
}

// Nodes returns the servers the Client runs on, for what lives beside the
// locks (packages permits, claims, rwlock on the single strategy's one
// Node; ratelimit on either): one Node for the single strategy, the
// quorum's N in the Config's order. They stay the Client's and close with
// it (or, from Config.Nodes, the caller's); the slice is the caller's.
func (c *Client) Nodes() []node.Node { return append([]node.Node(nil), c.servers.Nodes...) }

// Strategy returns "single" or "quorum".
func (c *Client) Strategy() string { return c.strategy }

// Close closes the Locker, then the nodes and clients Open made (not those
// of Config.Nodes); it does not release leases still held. It is safe to
// call more than once.
func (c *Client) Close() error {
	c.once.Do(func() { c.err = errors.Join(c.lk.Close(), c.servers.Close()) })
	return c.err
}
