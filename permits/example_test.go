package permits_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/permits"
)

// At most two exports run at once, across every process that shares the
// server. Each permit holds a slot: a resource split by slot fences each
// part with the permit's Key and Token.
func ExampleSemaphore() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	sem, err := permits.New(n, option.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}

	a, err := sem.Acquire(ctx, "export", 2, option.AutoRenew(true))
	if err != nil {
		log.Fatal(err)
	}
	b, err := sem.Acquire(ctx, "export", 2, option.AutoRenew(true))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", a.Key(), "and", b.Key())

	// Both permits are held: a third caller waits (Acquire) or is told so.
	_, err = sem.TryAcquire(ctx, "export", 2)
	fmt.Println("third taken:", errors.Is(err, lease.ErrTaken))

	// A release hands its permit, and its slot, to the next caller, with a
	// larger token.
	if err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}
	c, err := sem.Acquire(ctx, "export", 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next holds", c.Key(), "slot", permits.Slot(c), "token larger:", c.Token() > a.Token())

	store := fence.NewStore(n)
	if err := store.Put(ctx, c.Key(), "part 0", c.Token()); err != nil {
		log.Fatal(err)
	}
	err = store.Put(ctx, a.Key(), "late", a.Token())
	fmt.Println("the old holder's late write refused:", errors.Is(err, fence.ErrStale))

	_ = b.Release(ctx)
	_ = c.Release(ctx)
	// Output:
	// holding export#0 and export#1
	// third taken: true
	// next holds export#0 slot 0 token larger: true
	// the old holder's late write refused: true
}
