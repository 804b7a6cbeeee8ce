package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/redlock"
)

// A quorum of three independent servers. They persist every write before
// they acknowledge it (AOF with appendfsync always), which is what
// WithDurableNodes declares: without that declaration, a fresh quorum sits
// out one maximum TTL before it grants anything (see the package doc, "Lost
// data").
func ExampleNew() {
	dir, err := os.MkdirTemp("", "redlock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	var nodes []node.Node
	var stops []func()
	for i := range 3 {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o700); err != nil {
			log.Fatal(err)
		}
		addr, stop, err := redisproc.Start("--dir", d, "--appendonly", "yes", "--appendfsync", "always")
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		stops = append(stops, stop)

		client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		n := valkeygo.New(client)
		defer n.Close()
		nodes = append(nodes, n)
	}

	// The Locker uses the nodes but does not own them: closing it leaves
	// them open.
	locker, err := redlock.New(nodes, redlock.WithDurableNodes())
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
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Printf("taken: %v, %d of %d votes needed\n", errors.Is(err, lease.ErrTaken), qe.Got, qe.Needed)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// With one of the three servers gone, a majority still grants the
	// lock, and the new lease's fencing token is larger.
	stops[0]()
	next, err := locker.Acquire(ctx, "invoice:42")
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
	var nodes []node.Node
	for range 3 {
		addr, stop, err := redisproc.Start()
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		defer client.Close()
		n := valkeygo.New(client)
		defer n.Close()
		nodes = append(nodes, n)
	}
	// Fresh servers without persistence: WithDurableNodes only to keep
	// the example short (see ExampleNew).
	locker, err := redlock.New(nodes, redlock.WithDurableNodes())
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
