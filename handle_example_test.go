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
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/option"
)

func ExampleClient_Resume() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	// One process takes the lease and writes it out.
	first, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()
	l, err := first.Acquire(ctx, "deploy", option.TTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	h, err := l.Handle()
	if err != nil {
		log.Fatal(err)
	}
	handle := h.String() // a file, an environment variable, a job's output

	// Another process, with a Locker of its own on the same server, takes
	// it up and releases it.
	second, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}, Client: connect.ClientValkeyGo})
	if err != nil {
		log.Fatal(err)
	}
	defer second.Close()
	r, err := second.Resume(ctx, handle)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed", r.Key(), "same token:", r.Token() == l.Token())
	if err := r.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// The handle of a lease that ended is refused.
	_, err = second.Resume(ctx, handle)
	fmt.Println("after release:", errors.Is(err, dlock.ErrNotHeld))
	// Output:
	// resumed deploy same token: true
	// after release: true
}

func ExampleClient_ForceRelease() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	locker, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// A holder that hung, its lease held for an hour.
	stuck, err := locker.Acquire(ctx, "report", option.TTL(time.Hour), option.Metadata("host=batch-3"))
	if err != nil {
		log.Fatal(err)
	}
	var guard fence.Guard // the resource's fence
	_ = guard.Admit("report", stuck.Token())

	// The operator breaks the lock, and shows the break's token to the
	// fence: the hung holder's late writes are refused from then on.
	b, err := locker.ForceRelease(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held by:", b.Metadata, "token above it:", b.Token > b.Was)
	_ = guard.Admit("report", b.Token)
	fmt.Println("late write refused:", errors.Is(guard.Admit("report", stuck.Token()), dlock.ErrStale))
	fmt.Println("holder's extend:", errors.Is(stuck.Extend(ctx, time.Hour), dlock.ErrNotHeld))
	// Output:
	// held by: host=batch-3 token above it: true
	// late write refused: true
	// holder's extend: true
}
