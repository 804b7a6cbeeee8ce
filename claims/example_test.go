package claims_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/claims"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
)

// A worker drains a queue: each item is claimed under a lease, worked on,
// and completed, which removes it for good. A Retry would put it back.
func Example() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	ctx := context.Background()

	q, err := claims.New(n, "invoices", option.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Add(ctx, "invoice:41", "invoice:42", "invoice:41"); err != nil {
		log.Fatal(err)
	}
	for {
		c, err := q.Claim(ctx, option.AutoRenew(true))
		if errors.Is(err, claims.ErrEmpty) {
			fmt.Println("queue empty")
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		// The work: bound it by the lease, and carry c.Token() into
		// the writes it makes, where a fence can check it.
		fmt.Println("working on", c.ID(), "attempt", c.Attempt())
		if err := c.Complete(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// working on invoice:41 attempt 1
	// working on invoice:42 attempt 1
	// queue empty
}

// A worker paused past its lease finds, when it wakes, that the item went
// to another worker: its Complete is refused, and the item is completed
// once, by the worker with the newer token.
func ExampleClaim_Complete() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	ctx := context.Background()

	q, err := claims.New(n, "reports")
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Add(ctx, "report:7"); err != nil {
		log.Fatal(err)
	}
	paused, err := q.Claim(ctx, option.TTL(100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	<-paused.Lease().Done() // the worker stalls; its lease runs out

	// The next claim returns the expired item to the queue and takes it.
	next, err := q.ClaimWait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(next.ID(), "attempt", next.Attempt(), "token larger:", next.Token() > paused.Token())

	err = paused.Complete(ctx)
	fmt.Println("paused worker refused:", errors.Is(err, lease.ErrNotHeld), errors.Is(err, fence.ErrStale))
	fmt.Println("next worker completes:", next.Complete(ctx))
	// Output:
	// report:7 attempt 2 token larger: true
	// paused worker refused: true true
	// next worker completes: <nil>
}
