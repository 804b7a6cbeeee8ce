package main

import (
	"context"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
)

// ttl is the lease every case asks for: long next to the 1 ms hold, so
// no lock expires under a holder.
const ttl = 5 * time.Second

// subject is one library, strategy and client, set up afresh for each
// measurement on new clients.
type subject struct {
	library  string // floor, dlock, redislock, redsync
	strategy string // evalsha, single, quorum, quorum-notoken, redlock
	client   string // go-redis, valkey-go
	nodes    int
	variant  string // how a contended acquire waits (contention only)
	setup    func(ctx context.Context, addrs []string) (*instance, error)
}

func (s subject) name() string {
	n := s.library + " " + s.strategy
	if s.nodes > 1 {
		n += " N=" + strconv.Itoa(s.nodes)
	}
	n += " " + s.client
	if s.variant != "" {
		n += " [" + s.variant + "]"
	}
	return n
}

// uncontendedSubjects are measured as floor (one EVALSHA) or lock+unlock,
// at c=1 and c=64.
func uncontendedSubjects() []subject {
	s := []subject{
		{library: "floor", strategy: "evalsha", client: "go-redis", nodes: 1, setup: floorGoRedis},
		{library: "floor", strategy: "evalsha", client: "valkey-go", nodes: 1, setup: floorValkey},
	}
	singles, quorums := dlockSubjects("")
	s = append(append(s, singles...), claimsSubjects()...)
	s = append(s, permitsSubjects()...)
	s = append(s, ratelimitSubjects()...)
	s = append(s,
		subject{library: "redislock", strategy: "single", client: "go-redis", nodes: 1,
			setup: func(_ context.Context, a []string) (*instance, error) {
				return redislockInstance(a[:1], ttl, time.Millisecond)
			}},
		subject{library: "redsync", strategy: "redlock", client: "go-redis", nodes: 1,
			setup: func(_ context.Context, a []string) (*instance, error) { return redsyncInstance(a[:1], ttl) }},
		subject{library: "redsync", strategy: "redlock", client: "go-redis", nodes: 5,
			setup: func(_ context.Context, a []string) (*instance, error) { return redsyncInstance(a[:5], ttl) }},
	)
	// Last: the quorum nodes sit out their first TTL meanwhile.
	return append(s, quorums...)
}

// contentionSubjects each block until the lock is theirs, in the way the
// variant names.
func contentionSubjects() []subject {
	tuned := []redsync.Option{redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1 << 30)}
	singles, quorums := dlockSubjects("blocking Acquire")
	s := append(singles, quorums...)
	s = append(s,
		subject{library: "redislock", strategy: "single", client: "go-redis", nodes: 1, variant: "linear 1ms backoff",
			setup: func(_ context.Context, a []string) (*instance, error) {
				return redislockInstance(a[:1], ttl, time.Millisecond)
			}},
	)
	for _, n := range []int{1, 5} {
		s = append(s,
			subject{library: "redsync", strategy: "redlock", client: "go-redis", nodes: n, variant: "default: 32 tries, 50-250ms",
				setup: func(_ context.Context, a []string) (*instance, error) { return redsyncInstance(a[:n], ttl) }},
			subject{library: "redsync", strategy: "redlock", client: "go-redis", nodes: n, variant: "tuned: 1ms delay",
				setup: func(_ context.Context, a []string) (*instance, error) { return redsyncInstance(a[:n], ttl, tuned...) }},
		)
	}
	return s
}
