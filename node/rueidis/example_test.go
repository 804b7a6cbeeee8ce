package rueidis_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/rueidis"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/node"
	rueidisnode "github.com/dlockgo/dlock/node/rueidis"
)

// A rueidis client, as rueidislock's users already have one, wrapped into
// a Node and given to dlock.Open; the client stays the caller's to close,
// after the Locker.
func ExampleNew() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	n := rueidisnode.New(client)
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
