package dlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
)

// Outside a test's own life (a TestMain, a program, this example),
// StartServer gives an in-process server that a client reaches at its
// Addr. A lease left to run out ends after its TTL by the wall clock, and
// the next caller is granted the lock, as on a real server. In a test,
// dlocktest.New(t) is all it takes (see the package doc).
func ExampleStartServer() {
	srv, err := dlocktest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	locker, err := dlock.Open(ctx, dlock.Config{Nodes: []node.Node{n}})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	a, err := locker.TryAcquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryAcquire(ctx, "nightly-report")
	fmt.Println("a second caller is refused:", errors.Is(err, dlock.ErrTaken))
	if err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}

	b, err := locker.TryAcquire(ctx, "nightly-report", option.TTL(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	<-b.Done() // b neither renews nor releases
	fmt.Println("b's lease expired:", errors.Is(b.Err(), dlock.ErrExpired))
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := locker.Acquire(wait, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next caller holds it, with a larger token:", c.Token() > b.Token())
	if err := c.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a second caller is refused: true
	// b's lease expired: true
	// the next caller holds it, with a larger token: true
}
