package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"
)

// floorSrc is the script of the floor: one small write, as a lock script
// does, in one EVALSHA round trip.
const floorSrc = "redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) return 1"

// instance is one library set up on fresh clients; close ends them.
type instance struct {
	op      opFunc
	acquire acquireFunc
	close   func()
}

func newGoRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
}

func newValkey(addr string) (valkey.Client, error) {
	return valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
}

func floorGoRedis(ctx context.Context, addrs []string) (*instance, error) {
	c := newGoRedis(addrs[0])
	s := redis.NewScript(floorSrc)
	if err := s.Load(ctx, c).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &instance{
		op: func(ctx context.Context, key string) error {
			return s.EvalSha(ctx, c, []string{key}, "1").Err()
		},
		close: func() { c.Close() },
	}, nil
}

func floorValkey(ctx context.Context, addrs []string) (*instance, error) {
	c, err := newValkey(addrs[0])
	if err != nil {
		return nil, err
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(floorSrc).Build()).ToString()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &instance{
		op: func(ctx context.Context, key string) error {
			return c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(key).Arg("1").Build()).Error()
		},
		close: c.Close,
	}, nil
}

type redislockHeld redislock.Lock

func (h *redislockHeld) release(ctx context.Context) error {
	return (*redislock.Lock)(h).Release(ctx)
}

// redislockInstance is bsm/redislock on one node: Obtain without retry for
// the uncontended op, and with a linear backoff of backoff for contention.
func redislockInstance(addrs []string, ttl, backoff time.Duration) (*instance, error) {
	c := newGoRedis(addrs[0])
	rl := redislock.New(c)
	retry := &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)}
	return &instance{
		op: func(ctx context.Context, key string) error {
			l, err := rl.Obtain(ctx, key, ttl, nil)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		},
		acquire: func(ctx context.Context, key string) (held, error) {
			l, err := rl.Obtain(ctx, key, ttl, retry)
			if errors.Is(err, redislock.ErrNotObtained) {
				return nil, errGaveUp
			}
			if err != nil {
				return nil, err
			}
			return (*redislockHeld)(l), nil
		},
		close: func() { c.Close() },
	}, nil
}

type redsyncHeld redsync.Mutex

func (h *redsyncHeld) release(ctx context.Context) error {
	_, err := (*redsync.Mutex)(h).UnlockContext(ctx)
	return err
}

// redsyncInstance is redsync on len(addrs) nodes, one go-redis client each.
// The uncontended op is a Lock with one try; contention uses opts (nil: the
// defaults, 32 tries 50–250 ms apart).
func redsyncInstance(addrs []string, ttl time.Duration, opts ...redsync.Option) (*instance, error) {
	var (
		clients []*redis.Client
		pools   []redsyncredis.Pool
	)
	for _, a := range addrs {
		c := newGoRedis(a)
		clients = append(clients, c)
		pools = append(pools, goredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	expiry := redsync.WithExpiry(ttl)
	once := redsync.WithTries(1)
	lockOpts := append([]redsync.Option{expiry}, opts...)
	return &instance{
		op: func(ctx context.Context, key string) error {
			m := rs.NewMutex(key, expiry, once)
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		},
		acquire: func(ctx context.Context, key string) (held, error) {
			m := rs.NewMutex(key, lockOpts...)
			err := m.LockContext(ctx)
			var taken redsync.ErrTaken
			if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
				return nil, errGaveUp
			}
			if err != nil {
				return nil, fmt.Errorf("redsync: %w", err)
			}
			return (*redsyncHeld)(m), nil
		},
		close: func() {
			for _, c := range clients {
				c.Close()
			}
		},
	}, nil
}
