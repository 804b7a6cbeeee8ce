package main

import (
	"context"
	"fmt"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// locker is what both dlock strategies offer.
type locker interface {
	Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	Close() error
}

type leaseHeld lease.Lease

func (h *leaseHeld) release(ctx context.Context) error { return (*lease.Lease)(h).Release(ctx) }

// nodes builds one dlock Node per address on fresh clients of the named
// library; closeAll closes the Nodes, then the clients.
func nodes(client string, addrs []string) (ns []node.Node, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for _, a := range addrs {
		switch client {
		case "go-redis":
			c := newGoRedis(a)
			n := goredis.New(c)
			closers = append(closers, func() { c.Close() }, func() { n.Close() })
			ns = append(ns, n)
		case "valkey-go":
			c, err := newValkey(a)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			n := valkeygo.New(c)
			closers = append(closers, c.Close, func() { n.Close() })
			ns = append(ns, n)
		default:
			return nil, nil, fmt.Errorf("unknown client %q", client)
		}
	}
	return ns, closeAll, nil
}

// dlockInstance wraps lk: TryAcquire+Release uncontended, Acquire for
// contention (the Locker's own waiting: release published, retry as
// fallback).
func dlockInstance(lk locker, closeAll func()) *instance {
	return &instance{
		op: func(ctx context.Context, key string) error {
			l, err := lk.TryAcquire(ctx, key)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		},
		acquire: func(ctx context.Context, key string) (held, error) {
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				return nil, err
			}
			return (*leaseHeld)(l), nil
		},
		close: func() {
			lk.Close()
			closeAll()
		},
	}
}

func dlockSingle(client string) func(context.Context, []string) (*instance, error) {
	return func(_ context.Context, addrs []string) (*instance, error) {
		ns, closeAll, err := nodes(client, addrs[:1])
		if err != nil {
			return nil, err
		}
		lk, err := single.New(ns[0], option.TTL(ttl))
		if err != nil {
			closeAll()
			return nil, err
		}
		return dlockInstance(lk, closeAll), nil
	}
}

// dlockSubjects lists dlock's strategies on both clients; variant labels
// contention cases.
func dlockSubjects(variant string) (singles, quorums []subject) {
	for _, c := range []string{"go-redis", "valkey-go"} {
		singles = append(singles, subject{library: "dlock", strategy: "single", client: c, nodes: 1, variant: variant, setup: dlockSingle(c)})
	}
	for _, tokens := range []bool{false, true} {
		strategy := "quorum"
		if !tokens {
			strategy = "quorum-notoken"
		}
		for _, c := range []string{"go-redis", "valkey-go"} {
			quorums = append(quorums, subject{library: "dlock", strategy: strategy, client: c, nodes: quorumNodes, variant: variant, setup: dlockQuorum(c, tokens)})
		}
	}
	return singles, quorums
}
