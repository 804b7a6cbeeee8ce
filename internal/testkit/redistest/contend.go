package redistest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// OneWinner has n goroutines call try at once and fails t unless exactly
// one of them succeeds and every other fails with lease.ErrTaken; it
// returns the winner's lease.
func OneWinner(t testing.TB, n int, try func() (*lease.Lease, error)) *lease.Lease {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []*lease.Lease
		others []error
		start  = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			l, err := try()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				others = append(others, err)
				return
			}
			won = append(won, l)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range others {
		if !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("redistest: a contender's error: %v; want ErrTaken", err)
		}
	}
	if len(won) != 1 {
		t.Fatalf("redistest: %d winners of %d; want 1", len(won), n)
	}
	return won[0]
}

// WokenByRelease starts acquire in a goroutine, with a retry longer than
// its 10 s context, so that only the release published through
// Node.Subscribe lets it succeed; once subscribed reports the waiter's
// subscription on the server, it releases held, and returns the lease the
// waiter got, whose token must be above held's. It fails t when the
// waiter fails.
func WokenByRelease(t testing.TB, held *lease.Lease, acquire func(ctx context.Context, opts ...option.Option) (*lease.Lease, error), subscribed func()) *lease.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := acquire(ctx, option.Retry(time.Minute, time.Minute))
		got <- result{l, err}
	}()
	subscribed()
	if err := held.Release(ctx); err != nil {
		t.Fatalf("redistest: release: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("redistest: waiter: %v; want woken by the release", r.err)
	}
	if r.l.Token() <= held.Token() {
		t.Fatalf("redistest: waiter's token %d; want above the holder's %d", r.l.Token(), held.Token())
	}
	return r.l
}

// WaitSubscribed waits up to 5 s for a subscriber on channel of s, and
// fails t without one.
func (s *Server) WaitSubscribed(t testing.TB, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := s.Do("PUBSUB", "NUMSUB", channel)
		if err == nil && out != channel+"\n0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: no subscriber on %s", s.Addr(), channel)
		}
		time.Sleep(time.Millisecond)
	}
}
