package main

import (
	"context"
	"strings"

	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// permitsN is how many permits the permits case shares among its
// goroutines.
const permitsN = 8

// permitsSubjects is the semaphore on one name of permitsN permits, on
// both clients: an acquire+release by each goroutine, all on the name of
// their concurrency, so that at c=64 most of them wait in the name's
// queue and every release hands its permit on.
func permitsSubjects() []subject {
	var s []subject
	for _, c := range []string{"go-redis", "valkey-go"} {
		s = append(s, subject{library: "dlock", strategy: "permits N=8 one name", client: c, nodes: 1, setup: dlockPermits(c)})
	}
	return s
}

func dlockPermits(client string) func(context.Context, []string) (*instance, error) {
	return func(_ context.Context, addrs []string) (*instance, error) {
		ns, closeAll, err := nodes(client, addrs[:1])
		if err != nil {
			return nil, err
		}
		sem, err := permits.New(ns[0], option.TTL(ttl))
		if err != nil {
			closeAll()
			return nil, err
		}
		// The keys of one concurrency differ only after their last ':'.
		name := func(key string) string { return key[:max(strings.LastIndexByte(key, ':'), 0)] }
		return &instance{
			op: func(ctx context.Context, key string) error {
				l, err := sem.Acquire(ctx, name(key), permitsN)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			},
			close: func() {
				sem.Close()
				closeAll()
			},
		}, nil
	}
}
