package rwlock_test

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
	"github.com/dlockgo/dlock/rwlock"
)

// Readers of a document share its lock; a writer waits for them and then
// holds it alone. The readers after a writer share a token above that
// writer's, so a resource that fences by token refuses the writer's late
// act once they have shown it theirs, and a reader's late act once a newer
// writer has written.
func ExampleLocker() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	lk, err := rwlock.New(n, option.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	store := fence.NewStore(n)

	w, err := lk.Acquire(ctx, "doc")
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Put(ctx, "doc:body", "draft 1", w.Token()); err != nil {
		log.Fatal(err)
	}
	if err := w.Release(ctx); err != nil {
		log.Fatal(err)
	}

	a, err := lk.AcquireShared(ctx, "doc")
	if err != nil {
		log.Fatal(err)
	}
	b, err := lk.AcquireShared(ctx, "doc")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers, one token above the writer's:", a.Token() == b.Token() && a.Token() > w.Token())
	_, err = lk.TryAcquire(ctx, "doc")
	fmt.Println("a writer meanwhile is taken:", errors.Is(err, lease.ErrTaken))

	// A writer queues behind the readers, and readers that come after it
	// wait behind it.
	granted := make(chan *lease.Lease)
	go func() {
		w2, err := lk.Acquire(ctx, "doc")
		if err != nil {
			log.Fatal(err)
		}
		granted <- w2
	}()
	for {
		r, err := lk.TryAcquireShared(ctx, "doc")
		if errors.Is(err, lease.ErrTaken) {
			break // the writer waits: a new reader may not overtake it
		}
		if err != nil {
			log.Fatal(err)
		}
		_ = r.Release(ctx) // in before the writer queued
		time.Sleep(time.Millisecond)
	}
	fmt.Println("a new reader waits behind the writer")
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	w2 := <-granted
	if err := store.Put(ctx, "doc:body", "draft 2", w2.Token()); err != nil {
		log.Fatal(err)
	}
	err = store.Put(ctx, "doc:body", "from a late reader", a.Token())
	fmt.Println("a late reader's write refused:", errors.Is(err, fence.ErrStale))
	_ = w2.Release(ctx)
	// Output:
	// two readers, one token above the writer's: true
	// a writer meanwhile is taken: true
	// a new reader waits behind the writer
	// a late reader's write refused: true
}
