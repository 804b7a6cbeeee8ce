package single_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// A transfer between two accounts holds both accounts' locks, taken at
// once: another transfer over the same accounts, whatever order it names
// them in, waits for the whole set, and a lock on either account alone is
// refused meanwhile. Each account's writes carry that account's token.
func ExampleLocker_AcquireAll() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	locker, err := single.New(n, option.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	l, err := locker.AcquireAll(ctx, []string{"acct:17", "acct:42"}, option.AutoRenew(true))
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range l.Keys() {
		fmt.Println("holding", h.Key, "fenced:", h.Token > 0)
	}

	_, err = locker.TryAcquire(ctx, "acct:42")
	fmt.Println("acct:42 alone taken:", errors.Is(err, lease.ErrTaken))
	_, err = locker.TryAcquireAll(ctx, []string{"acct:42", "acct:99"})
	fmt.Println("acct:42 and acct:99 taken:", errors.Is(err, lease.ErrTaken))

	old, _ := l.TokenOf("acct:42")
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := locker.TryAcquireAll(ctx, []string{"acct:42", "acct:17"})
	if err != nil {
		log.Fatal(err)
	}
	tok, _ := next.TokenOf("acct:42")
	fmt.Println("acct:42's next token is larger:", tok > old)
	if err := next.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding acct:17 fenced: true
	// holding acct:42 fenced: true
	// acct:42 alone taken: true
	// acct:42 and acct:99 taken: true
	// acct:42's next token is larger: true
}
