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
