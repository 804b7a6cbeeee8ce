package dlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/ratelimit"
)

func Example() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.OpenURL(ctx, "redis://"+addr+"?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	l, err := locker.Acquire(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", l.Key())

	// A second attempt, while the lease lasts, finds the lock taken.
	_, err = locker.TryAcquire(ctx, "invoice:42")
	fmt.Println("second attempt taken:", errors.Is(err, dlock.ErrTaken))

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", errors.Is(l.Err(), dlock.ErrReleased))

	// The next lease on the key carries a larger fencing token. Tokens are
	// not consecutive (the single strategy floors them at the server's clock
	// in microseconds); only their order means anything.
	next, err := locker.Acquire(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("next token larger:", next.Token() > l.Token())
	// Output:
	// holding invoice:42
	// second attempt taken: true
	// released: true
	// next token larger: true
}

// A URL says where the locks live and how: the scheme chooses the strategy
// (redis:// one server, quorum:// N independent masters, a second s for
// TLS) and the parameters set the rest; connect.ParseURL lists them.
func ExampleOpenURL() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.OpenURL(ctx, "redis://"+addr+"/0?ttl=10s&idle_ttl=1h")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	fmt.Println("strategy:", locker.Strategy())

	l, err := locker.TryAcquire(ctx, "url-example")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	fmt.Println("granted for at most 10s:", l.TTL() <= 10*time.Second)
	// Output:
	// strategy: single
	// granted for at most 10s: true
}

func ExampleDo() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// Do holds the lock, renewed, while the function runs. The function's
	// context ends if the lease is lost. Each run gets a larger token than
	// the run before it: carry it into every write you fence.
	var tokens []fence.Token
	for range 2 {
		err = dlock.Do(ctx, locker, "nightly-report", func(ctx context.Context, token fence.Token) error {
			tokens = append(tokens, token)
			return nil
		})
		fmt.Println("err:", err)
	}
	fmt.Println("second run's token larger:", tokens[1] > tokens[0])
	// Output:
	// err: <nil>
	// err: <nil>
	// second run's token larger: true
}

// A holder that stalls past its TTL loses the lock to the next one; the
// fenced store then refuses its late write.
func Example_fencedWrite() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.OpenURL(ctx, "redis://"+addr)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// The resource: a value in Redis that takes a write only with a
	// token at least as new as the newest it has taken.
	store := fence.NewStore(locker.Nodes()[0])

	slow, err := locker.Acquire(ctx, "report", option.TTL(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a GC pause, a stalled VM...

	next, err := locker.Acquire(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	if err := store.Put(ctx, "report:body", "fresh", next.Token()); err != nil {
		log.Fatal(err)
	}

	err = store.Put(ctx, "report:body", "late", slow.Token())
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStale))
	body, token, _, _ := store.Get(ctx, "report:body")
	fmt.Println("stored:", body, "under the next holder's token:", token == next.Token())
	// Output:
	// late write refused: true
	// stored: fresh under the next holder's token: true
}

// A rate limit beside the locks, on the servers the Locker already uses:
// one server here, a quorum's nodes with the quorum strategy. The Nodes
// stay the Locker's and close with it.
func ExampleClient_Nodes() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.OpenURL(ctx, "redis://"+addr)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	limiter, err := ratelimit.New(locker.Nodes(), ratelimit.Limit{Rate: 1, Per: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for range 2 {
		r, err := limiter.Allow(ctx, "report:weekly")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("admitted:", r.Allowed)
	}
	// Output:
	// admitted: true
	// admitted: false
}
