package ratelimit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/ratelimit"
)

// Two sends a minute per user, across every process that shares the
// server: the third is refused, and told when to retry.
func ExampleLimiter_Allow() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	limiter, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 2, Per: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for range 3 {
		r, err := limiter.Allow(ctx, "send:user-42")
		if err != nil {
			log.Fatal(err)
		}
		if r.Allowed {
			fmt.Println("sent;", r.Remaining, "left")
		} else {
			fmt.Println("refused; retry in", r.RetryAfter.Round(time.Second))
		}
	}
	// Output:
	// sent; 1 left
	// sent; 0 left
	// refused; retry in 30s
}

// Wait paces a loop at the limit's rate: here 20 a second, one at a time.
func ExampleLimiter_Wait() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	limiter, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 20, Per: time.Second, Burst: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	start := time.Now()
	for range 5 {
		if _, err := limiter.Wait(ctx, "crawl:example.com"); err != nil {
			log.Fatal(err) // ctx ended first: errors.Is(err, context.DeadlineExceeded)
		}
	}
	fmt.Println("5 calls, at least 200ms:", time.Since(start) >= 190*time.Millisecond)
	// Output: 5 calls, at least 200ms: true
}

// On three independent masters a request is admitted when two of them
// admit it, so the limit holds, and keeps admitting, with one of them
// down.
func ExampleNew_quorum() {
	// Three servers of the reader's (the tests set DLOCK_ADDRS).
	addrs := strings.Split(cmp.Or(os.Getenv("DLOCK_ADDRS"), "localhost:6379,localhost:6380,localhost:6381"), ",")
	ctx := context.Background()

	nodes := make([]node.Node, 3)
	for i := range nodes {
		client := redis.NewClient(&redis.Options{Addr: addrs[i]})
		defer client.Close()
		nodes[i] = goredis.New(client)
		defer nodes[i].Close()
	}
	limiter, err := ratelimit.New(nodes, ratelimit.Limit{Rate: 100, Per: time.Minute, Burst: 10},
		option.NodeTimeout(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	r, err := limiter.AllowN(ctx, "import:tenant-7", 4)
	if err != nil {
		log.Fatal(err) // ratelimit.ErrNoQuorum: two of the three did not answer
	}
	fmt.Println("majority", limiter.Majority(), "admitted", r.Allowed, "left", r.Remaining)
	// Output: majority 2 admitted true left 6
}

// A limit read from configuration is checked before a Limiter is built:
// the error names the field and the rule it breaks.
func ExampleLimit_Check() {
	for _, l := range []ratelimit.Limit{
		{Rate: 10, Per: time.Second},
		{Rate: 10, Per: time.Second, Burst: -1},
		{Rate: 0, Per: time.Minute},
	} {
		if err := l.Check(); err != nil {
			var bad *lease.ArgError
			fmt.Println(errors.As(err, &bad), bad.Arg)
			continue
		}
		fmt.Println(l)
	}
	// Output:
	// 10/1s burst 10
	// true limit.Burst
	// true limit.Rate
}
