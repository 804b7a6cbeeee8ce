// Command quickstart runs a job under a lock: however many copies run at
// once, on however many machines, one does the job at a time, and its
// fencing token goes with every write it makes.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/dlockgo/dlock"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	// One server; a quorum of independent masters is "quorum://h1,h2,h3".
	url := cmp.Or(os.Getenv("DLOCK_URL"), "redis://localhost:6379")
	locker, err := dlock.OpenURL(ctx, url)
	if err != nil {
		return err
	}
	defer locker.Close()

	// Do waits for the lock, keeps it renewed while the job runs, and
	// releases it after. ctx ends if the lease is lost.
	return dlock.Do(ctx, locker, "nightly-report", func(ctx context.Context, token dlock.Token) error {
		// Carry token into every write the lock protects, so that the
		// resource can refuse a holder paused past its lease.
		fmt.Println("writing the nightly report under token", token)
		return nil
	})
}
