package goredis_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node/goredis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCloseRacesFirstSubscribe: a Close that comes while the first
// Subscribe is under way leaves no subscription reader running.
func TestCloseRacesFirstSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer c.Close()
	for i := range 300 {
		n := goredis.New(c)
		errc := make(chan error, 1)
		go func() {
			_, stop, err := n.Subscribe(t.Context(), "race")
			if err == nil {
				stop()
			}
			errc <- err
		}()
		if i%2 == 1 {
			time.Sleep(time.Duration(i%7) * 20 * time.Microsecond)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		<-errc
		if !goredis.ReaderEnded(n, time.Second) {
			t.Fatalf("round %d: the subscription reader outlived Close", i)
		}
	}
}

// TestNilOption: New skips a nil Option, as the constructors of dlock's
// packages skip the zero option.Option, and makes a Node that works,
// with or without the options beside it.
func TestNilOption(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer c.Close()
	for _, opts := range [][]goredis.Option{{nil}, {nil, goredis.WithoutBatching(), nil}} {
		n := goredis.New(c, opts...)
		_, err := n.Eval(t.Context(), echo, []string{"nil-option"}, "x")
		n.Close()
		if err != nil {
			t.Fatalf("New(c, %d options, nil among them): Eval: %v", len(opts), err)
		}
	}
}
