package observe_test

import (
	"cmp"
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

func ExampleLog() {
	addr := cmp.Or(os.Getenv("DLOCK_ADDR"), "localhost:6379") // the server, host:port (the tests set DLOCK_ADDR)

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		// Drop what changes from run to run, so the output can be checked.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "wait" {
				return slog.Attr{}
			}
			return a
		},
	}))

	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	n := goredis.New(client)
	defer n.Close()
	lk, err := single.New(n, option.Observer(observe.Log(logger)))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	l, err := lk.Acquire(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "report"); err == nil {
		log.Fatal("acquired a held lock")
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// level=INFO msg="dlock acquired" key=report strategy=single outcome=acquired
	// level=INFO msg="dlock released" key=report strategy=single outcome=ok
}
