package single_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/single"
)

// lateNode is a real server's Node with two faults injected, as a slow
// network path makes them: the first claim reaches the server late (its
// grant is then too late for the client to use), and the release the
// client sends for that grant arrives later still, after the client has
// moved on: its call fails at once, and the script runs in the background
// once the test lets it.
type lateNode struct {
	node.Node
	claimDelay time.Duration
	mu         sync.Mutex
	claimed    bool
	held       bool          // a release was held back
	release    chan struct{} // closed to let the held release run
	done       chan struct{} // closed once it ran
}

func (n *lateNode) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	n.mu.Lock()
	first := s == single.ClaimScript && !n.claimed
	n.claimed = n.claimed || s == single.ClaimScript
	hold := s == single.ReleaseScript && !n.held && n.claimed
	n.held = n.held || hold
	n.mu.Unlock()
	if first {
		time.Sleep(n.claimDelay)
	}
	if hold {
		go func() {
			defer close(n.done)
			<-n.release
			_, _ = n.Node.Eval(context.Background(), s, keys, args...)
		}()
		return nil, errors.New("lateNode: the release is on its way")
	}
	return n.Node.Eval(ctx, s, keys, args...)
}

// TestLateReleaseOfLateGrant: a grant that came too late to use is
// released, and Acquire tries again. Were the next claim sent under the
// same owner while that release was still on its way, the server would
// take it for the same claim run again and grant the same token, and the
// late release would then free the lease the caller now holds, letting
// another caller in beside it. The next claim goes under a new owner: it
// waits behind the late grant, and the release hands the lock to it.
func TestLateReleaseOfLateGrant(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			srv := redistest.Start(t)
			const ttl = 400 * time.Millisecond
			late := &lateNode{Node: redistest.NodeFor(t, client, srv.Addr()), claimDelay: ttl,
				release: make(chan struct{}), done: make(chan struct{})}
			lk := newLocker(t, late, option.TTL(ttl))
			other := newLocker(t, redistest.NodeFor(t, client, srv.Addr()), option.TTL(ttl))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()

			got := make(chan *lease.Lease, 1)
			go func() {
				l, err := lk.Acquire(ctx, "k")
				if err != nil {
					t.Errorf("Acquire: %v", err)
				}
				got <- l
			}()
			// The late grant's lease runs on the server for a TTL from its
			// arrival; let the held release arrive within it, after the
			// next claim was sent.
			time.Sleep(ttl + ttl/4)
			close(late.release)
			<-late.done
			l := <-got
			if l == nil {
				return
			}
			if _, err := other.TryAcquire(ctx, "k"); !errors.Is(err, lease.ErrTaken) && l.TTL() > 0 {
				t.Fatalf("another caller's TryAcquire while the lease has %v left: %v; want ErrTaken", l.TTL(), err)
			}
			_ = l.Release(ctx)
		})
	}
}
