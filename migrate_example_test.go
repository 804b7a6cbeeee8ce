package dlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/option"
)

// From redsync: a Mutex over N independent masters is the quorum
// strategy over the same masters (docs/migrating.md).
func Example_migrateFromRedsync() {
	// The masters, host:port each (the tests set DLOCK_ADDRS to three of
	// their own).
	addrs := strings.Split(cmp.Or(os.Getenv("DLOCK_ADDRS"), "localhost:6379,localhost:6380,localhost:6381"), ",")
	ctx := context.Background()

	// redsync.New(pools...) and rs.NewMutex(name, redsync.WithExpiry(8*time.Second)):
	// one Locker for every key. These servers fsync every write, which
	// DurableNodes declares; without it a fresh quorum sits out one
	// maximum TTL first (docs/deployment.md, "Troubleshooting").
	locker, err := dlock.Open(ctx, dlock.Config{
		Strategy:     connect.StrategyQuorum,
		Addrs:        addrs,
		TTL:          8 * time.Second,
		DurableNodes: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// mutex.LockContext(ctx), retried WithTries times WithRetryDelay apart:
	// Acquire retries until its context ends, so the deadline bounds it.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := locker.Acquire(wctx, "invoice:42",
		option.Retry(50*time.Millisecond, 250*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	// mutex.TryLockContext(ctx) and *redsync.ErrTaken: TryAcquire and ErrTaken.
	_, err = locker.TryAcquire(ctx, "invoice:42")
	fmt.Println("taken:", errors.Is(err, dlock.ErrTaken))

	// redsync has no token; here every lease carries one, ordered across
	// the quorum: hand it to the resource you write to (docs/fencing.md).
	fmt.Println("fenced:", l.Fenced())

	// mutex.ExtendContext(ctx) returns (bool, error); Extend returns an
	// error alone, nil when a majority extended the lease.
	if err := l.Extend(ctx, 8*time.Second); err != nil {
		log.Fatal(err)
	}

	// mutex.UnlockContext(ctx) returns (bool, error); Release returns an
	// error alone, matching ErrNotHeld when the lease was no longer held.
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	err = l.Release(ctx)
	fmt.Println("second release not held:", errors.Is(err, dlock.ErrNotHeld))
	// Output:
	// taken: true
	// fenced: true
	// second release not held: true
}

// From redislock: a lock on one server is the single strategy.
func Example_migrateFromRedislock() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	// redislock.New(client): Open with the address (or Config.Nodes with
	// your own client, wrapped by its adapter).
	locker, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// locker.Obtain(ctx, key, ttl, &redislock.Options{Metadata: ...}) makes
	// one attempt, as TryAcquire does; ErrNotObtained is ErrTaken.
	l, err := locker.TryAcquire(ctx, "report", option.TTL(10*time.Second), option.Metadata("host=web-4"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryAcquire(ctx, "report")
	fmt.Println("second obtain taken:", errors.Is(err, dlock.ErrTaken))

	// lock.Metadata() and lock.TTL(ctx): the lease's own, or anyone's view
	// of the key with Inspect.
	info, err := locker.Inspect(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", info.Held, "metadata:", info.Metadata, "same token:", info.Token == l.Token())

	// lock.Refresh(ctx, ttl, nil): Extend.
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		log.Fatal(err)
	}

	// Options{RetryStrategy: redislock.LinearBackoff(d)} with a deadline:
	// Acquire, paced by option.Retry, until its context ends.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = locker.Acquire(wctx, "report", option.Retry(10*time.Millisecond, 10*time.Millisecond))
	fmt.Println("wait ran out:", errors.Is(err, context.DeadlineExceeded))

	// lock.Release(ctx), and ErrLockNotHeld: Release, and ErrNotHeld.
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released again:", errors.Is(l.Release(ctx), dlock.ErrNotHeld))
	// Output:
	// second obtain taken: true
	// held: true metadata: host=web-4 same token: true
	// wait ran out: true
	// released again: true
}

// From rueidislock: WithContext's context, cancelled when the lock is
// lost, is a renewed lease's Context.
func Example_migrateFromRueidislock() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)
	ctx := context.Background()

	// rueidislock.NewLocker(LockerOption{KeyMajority: 1, KeyValidity: 5s}):
	// one server, the single strategy, with a 5s TTL.
	locker, err := dlock.OpenURL(ctx, "redis://"+addr+"?ttl=5s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// lctx, cancel, err := locker.WithContext(ctx, "my_lock"): Acquire,
	// renewed in the background (rueidislock's ExtendInterval), and the
	// lease's Context, which ends if the lease is lost.
	l, err := locker.Acquire(ctx, "my_lock", option.AutoRenew(true))
	if err != nil {
		log.Fatal(err)
	}
	lctx := l.Context(ctx)

	// locker.TryWithContext and ErrNotLocked: TryAcquire and ErrTaken.
	_, err = locker.TryAcquire(ctx, "my_lock")
	fmt.Println("try taken:", errors.Is(err, dlock.ErrTaken))

	// cancel(): Release, which ends the lease's Context too.
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	<-lctx.Done()
	fmt.Println("context ended by:", context.Cause(lctx))

	// The same in one call: Do holds the lock, renewed, while fn runs, and
	// hands fn the context and the fencing token.
	err = dlock.Do(ctx, locker, "my_lock", func(ctx context.Context, token fence.Token) error {
		fmt.Println("in Do, token > 0:", token > 0)
		return nil
	})
	fmt.Println("Do:", err)
	// Output:
	// try taken: true
	// context ended by: dlock: lease released
	// in Do, token > 0: true
	// Do: <nil>
}
