package quorum_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// A quorum of three independent servers. They persist every write before
// they acknowledge it (AOF with appendfsync always), which is what
// option.DurableNodes declares: without that declaration, a fresh quorum sits
// out one maximum TTL before it grants anything (see the package doc, "Lost
// data").
func ExampleNew() {
	// The servers, host:port each, comma-separated (the tests set
	// DLOCK_ADDRS to three of their own).
	addrs := strings.Split(cmp.Or(os.Getenv("DLOCK_ADDRS"), "localhost:6379,localhost:6380,localhost:6381"), ",")
	nodes := make([]node.Node, 3)
	for i := range nodes {
		client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addrs[i]}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		nodes[i] = valkeygo.New(client)
		defer nodes[i].Close()
	}

	// The Locker uses the nodes but does not own them: closing it leaves
	// them open.
	locker, err := quorum.New(nodes, option.DurableNodes(true))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	l, err := locker.Acquire(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", l.Key())

	// A second attempt finds the lock held by a majority, and says what
	// each node answered.
	_, err = locker.TryAcquire(ctx, "invoice:42")
	var qe *quorum.Error
	if errors.As(err, &qe) {
		fmt.Printf("taken: %v, %d of %d votes needed\n", errors.Is(err, lease.ErrTaken), qe.Got, qe.Needed)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// With one of the three servers out of reach (here: nothing listens
	// at its address), a majority still grants the lock, and the new
	// lease's fencing token is larger.
	// valkey-go dials when its client is made, go-redis on first use.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer dead.Close()
	deadNode := goredis.New(dead)
	defer deadNode.Close() // ends its subscription, which retries a dead server for ever
	two, err := quorum.New([]node.Node{deadNode, nodes[1], nodes[2]}, option.DurableNodes(true))
	if err != nil {
		log.Fatal(err)
	}
	defer two.Close()
	next, err := two.Acquire(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("one node down, next token larger:", next.Token() > l.Token())
	if err := next.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding invoice:42
	// taken: true, 0 of 2 votes needed
	// one node down, next token larger: true
}

// A transfer between two accounts locks both at once, all or nothing, on a
// quorum of three servers. Each key carries a fencing token of its own,
// for the writes to that account; a lock on one account alone is refused
// while the set is held.
func ExampleLocker_AcquireAll() {
	// The servers, host:port each, comma-separated (the tests set
	// DLOCK_ADDRS to three of their own).
	addrs := strings.Split(cmp.Or(os.Getenv("DLOCK_ADDRS"), "localhost:6379,localhost:6380,localhost:6381"), ",")
	nodes := make([]node.Node, 3)
	for i := range nodes {
		client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addrs[i]}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		nodes[i] = valkeygo.New(client)
		defer nodes[i].Close()
	}
	// Servers that persist every write (see ExampleNew).
	locker, err := quorum.New(nodes, option.DurableNodes(true))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	l, err := locker.AcquireAll(ctx, []string{"account:7", "account:3"})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range l.Keys() {
		fmt.Println("holding", h.Key, "fenced:", h.Token > 0)
	}
	_, err = locker.TryAcquire(ctx, "account:3")
	fmt.Println("account:3 alone taken:", errors.Is(err, lease.ErrTaken))
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	one, err := locker.TryAcquire(ctx, "account:3")
	if err != nil {
		log.Fatal(err)
	}
	t3, _ := l.TokenOf("account:3")
	fmt.Println("after release, account:3 token larger:", one.Token() > t3)
	if err := one.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding account:7 fenced: true
	// holding account:3 fenced: true
	// account:3 alone taken: true
	// after release, account:3 token larger: true
}
