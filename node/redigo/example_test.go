package redigo_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/redigo"
)

// A redigo pool, as redsync's users already have one, wrapped into a
// Node and given to dlock.Open; the pool stays the caller's to close,
// after the Locker. The address given to New names the server (in errors,
// and to tell a quorum's servers apart); the pool's Dial decides where
// connections go.
func ExampleNew() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	pool := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) },
		MaxIdle:     8,
		IdleTimeout: time.Minute,
	}
	defer pool.Close()
	n := redigo.New(pool, addr)
	defer n.Close()
	locker, err := dlock.Open(ctx, dlock.Config{Nodes: []node.Node{n}, TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	l, err := locker.TryAcquire(ctx, "report:daily")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fenced:", l.Token() > 0)
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// fenced: true
}
