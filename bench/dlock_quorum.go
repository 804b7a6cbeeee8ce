package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// dlockQuorum runs with the lost-data guard on, as on nodes without
// persistence it must: the nodes sat out their first TTL during priming.
func dlockQuorum(client string, tokens bool) func(context.Context, []string) (*instance, error) {
	return func(ctx context.Context, addrs []string) (*instance, error) {
		if err := waitPrimed(ctx); err != nil {
			return nil, err
		}
		ns, closeAll, err := nodes(client, addrs[:quorumNodes])
		if err != nil {
			return nil, err
		}
		opts := []option.Option{option.TTL(ttl)}
		if !tokens {
			opts = append(opts, option.Tokens(false))
		}
		lk, err := quorum.New(ns, opts...)
		if err != nil {
			closeAll()
			return nil, err
		}
		return dlockInstance(lk, closeAll), nil
	}
}

const quorumNodes = 5

// primedAt is when the quorum nodes' lost-data epochs were stamped: a
// brand-new node looks like one that lost its data, and sits out one
// maximum TTL (here ttl) before it votes.
var primedAt time.Time

// primeQuorum stamps every node's epoch with one attempt on a throwaway
// key, so the sit-out runs while other cases are measured.
func primeQuorum(ctx context.Context, addrs []string) error {
	ns, closeAll, err := nodes("go-redis", addrs[:quorumNodes])
	if err != nil {
		return err
	}
	defer closeAll()
	lk, err := quorum.New(ns, option.TTL(ttl))
	if err != nil {
		return err
	}
	defer lk.Close()
	primedAt = time.Now()
	if l, err := lk.TryAcquire(ctx, "bench:prime"); err == nil {
		_ = l.Release(ctx) // only possible if the guard were off
	}
	return ctx.Err()
}

func waitPrimed(ctx context.Context) error {
	if primedAt.IsZero() {
		return fmt.Errorf("quorum nodes not primed")
	}
	sleepCtx(ctx, time.Until(primedAt.Add(ttl+250*time.Millisecond)))
	return ctx.Err()
}
