package main

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/dlockgo/dlock/internal/testkit/examplemain"
)

func TestMain(m *testing.M) { os.Exit(examplemain.With(m, 1).Run()) }

// TestRun runs the program the README shows, four copies at once, against
// a server of the test's own: each waits its turn and does the job.
func TestRun(t *testing.T) {
	t.Setenv("DLOCK_URL", "redis://"+os.Getenv("DLOCK_ADDR"))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- run(context.Background()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
