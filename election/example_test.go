package election_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/option"
)

func Example() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.OpenURL(ctx, "redis://"+addr)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// A leader that dies without resigning holds the office for up to
	// its TTL.
	office, err := election.New(locker, "db-primary", option.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}

	// Anyone can follow the office: its state now, then each change.
	octx, cancel := context.WithCancel(ctx)
	leaders, err := office.Observe(octx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("vacant:", <-leaders == election.Leader{})

	term, err := office.Campaign(ctx, "10.0.0.7:5432")
	if err != nil {
		log.Fatal(err)
	}
	seen := <-leaders
	fmt.Println("observed:", seen.Value, "with the term's token:", seen.Token == term.Token())

	leader, err := office.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Value)

	// The leader's work runs under term.Context, which ends if the
	// office is lost, and carries the token to the resource, which
	// refuses any older term's.
	var guard fence.Guard
	work := term.Context(ctx)
	fmt.Println("write admitted:", work.Err() == nil && guard.Admit("primary-config", term.Token()) == nil)

	if err := term.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("vacant again:", <-leaders == election.Leader{})
	_, err = office.Leader(ctx)
	fmt.Println("no leader:", errors.Is(err, election.ErrNoLeader))

	cancel()
	for range leaders { // closed once the observer has ended
	}
	// Output:
	// vacant: true
	// observed: 10.0.0.7:5432 with the term's token: true
	// leader: 10.0.0.7:5432
	// write admitted: true
	// vacant again: true
	// no leader: true
}
