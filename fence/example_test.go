package fence_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/node/goredis"
)

// A resource kept in this process admits a write only with a token at least
// as large as any it has seen. The tokens would come from Lease.Token; here
// they are written out: the holder of 41 stalled, its lease ran out, and the
// lock went to the holder of 42.
func ExampleGuard() {
	var (
		guard fence.Guard
		mu    sync.Mutex // serialises Admit with the write it allows
		body  string
	)
	write := func(token fence.Token, text string) error {
		mu.Lock()
		defer mu.Unlock()
		if err := guard.Admit("report", token); err != nil {
			return err
		}
		body = text
		return nil
	}

	fmt.Println(write(41, "draft"))
	fmt.Println(write(42, "final"))
	fmt.Println(write(41, "late draft"))
	fmt.Println(write(42, "final, amended")) // the current holder writes again
	fmt.Printf("body %q, highest token %d\n", body, guard.Highest("report"))
	// Output:
	// <nil>
	// <nil>
	// dlock: stale fencing token for "report": got 41, resource has seen 42
	// <nil>
	// body "final, amended", highest token 42
}

// A fenced register in Redis: the comparison and the write run as one
// script on the server, so writers in any number of processes cannot
// interleave an older token past a newer one.
func ExampleStore() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	store := fence.NewStore(n)
	ctx := context.Background()

	if err := store.Put(ctx, "report:body", "final", 42); err != nil {
		log.Fatal(err)
	}
	err := store.Put(ctx, "report:body", "late draft", 41)
	fmt.Println("stale:", errors.Is(err, fence.ErrStale))
	var se *fence.StaleError
	if errors.As(err, &se) {
		fmt.Println("refused", se.Token, "after", se.Highest)
	}

	body, token, ok, err := store.Get(ctx, "report:body")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(body, token, ok)
	// Output:
	// stale: true
	// refused 41 after 42
	// final 42 true
}
