package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
)

// One item through a work queue, as one op: Add, Claim, Complete on a
// dlock claims.Queue, against the same three steps on a bare ZPOPMIN
// queue (a ZADD, a script that pops and records the lease's end, a ZREM:
// no token, no owner, no lease on the client, no done record, no return
// of expired claims), both through the same go-redis Node, in the same
// run. The op's key names the queue: at c=64 each goroutine has its own.

var (
	// zpopAdd: KEYS pending; ARGV id, order score.
	zpopAdd = node.NewScript("return redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])")
	// zpopClaim: KEYS pending, active; ARGV the lease's end. Replies the
	// id, or nil.
	zpopClaim = node.NewScript(`local r = redis.call('ZPOPMIN', KEYS[1])
if not r[1] then return false end
redis.call('ZADD', KEYS[2], ARGV[1], r[1])
return r[1]`)
	// zpopComplete: KEYS active; ARGV id.
	zpopComplete = node.NewScript("return redis.call('ZREM', KEYS[1], ARGV[1])")
)

// itemSeq numbers the items of every queue case: ids never repeat, so no
// done record keeps one out.
var itemSeq atomic.Int64

// claimsSubjects are the work-queue cases, measured as lock+unlock is.
func claimsSubjects() []subject {
	return []subject{
		{library: "dlock", strategy: "claims", client: "go-redis", nodes: 1, setup: dlockClaims},
		{library: "zpopmin", strategy: "bare queue", client: "go-redis", nodes: 1, setup: zpopQueue},
	}
}

func dlockClaims(_ context.Context, addrs []string) (*instance, error) {
	ns, closeAll, err := nodes("go-redis", addrs[:1])
	if err != nil {
		return nil, err
	}
	var (
		mu     sync.Mutex
		queues = map[string]*claims.Queue{}
	)
	queue := func(key string) (*claims.Queue, error) {
		mu.Lock()
		defer mu.Unlock()
		if q := queues[key]; q != nil {
			return q, nil
		}
		q, err := claims.New(ns[0], key, option.TTL(ttl))
		if err == nil {
			queues[key] = q
		}
		return q, err
	}
	return &instance{
		op: func(ctx context.Context, key string) error {
			q, err := queue(key)
			if err != nil {
				return err
			}
			if err := q.Add(ctx, "item-"+strconv.FormatInt(itemSeq.Add(1), 10)); err != nil {
				return err
			}
			c, err := q.Claim(ctx)
			if err != nil {
				return err
			}
			return c.Complete(ctx)
		},
		close: closeAll,
	}, nil
}

func zpopQueue(_ context.Context, addrs []string) (*instance, error) {
	ns, closeAll, err := nodes("go-redis", addrs[:1])
	if err != nil {
		return nil, err
	}
	n := ns[0]
	return &instance{
		op: func(ctx context.Context, key string) error {
			keys := []string{"zpop:{" + key + "}:pending", "zpop:{" + key + "}:active"}
			s := strconv.FormatInt(itemSeq.Add(1), 10)
			if _, err := n.Eval(ctx, zpopAdd, keys[:1], "item-"+s, s); err != nil {
				return err
			}
			r, err := n.Eval(ctx, zpopClaim, keys, strconv.FormatInt(time.Now().Add(ttl).UnixMilli(), 10))
			if err != nil {
				return err
			}
			_, err = n.Eval(ctx, zpopComplete, keys[1:], r.Str(0))
			return err
		},
		close: closeAll,
	}, nil
}

// claimsChecks holds the work-queue target: claims at c=64 at least 0.7x
// the items/s of the bare ZPOPMIN queue, same client, same run.
func claimsChecks(rs []Result) []Check {
	get := func(lib, strategy string) *Result {
		return find(rs, func(r Result) bool {
			return r.Library == lib && r.Strategy == strategy && r.Client == "go-redis" && r.Concurrency == parallelism
		})
	}
	c, z := get("dlock", "claims"), get("zpopmin", "bare queue")
	if c == nil || z == nil || c.OpsPerS == nil || z.OpsPerS == nil || *z.OpsPerS == 0 {
		return nil
	}
	return []Check{atLeastCheck("claims c=64 go-redis >= 0.7x a bare ZPOPMIN queue's items/s", c.ID,
		*c.OpsPerS / *z.OpsPerS, 0.7, "x ZPOPMIN")}
}
