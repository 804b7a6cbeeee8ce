package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/redlock"
)

func TestInspect(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx := t.Context()
			nodes := make([]node.Node, len(srvs))
			for i, s := range srvs {
				nodes[i] = redistest.NodeFor(t, client, s.Addr())
			}
			lk, err := redlock.New(nodes, redlock.WithDurableNodes(), redlock.WithNodeTimeout(time.Second))
			require.NoError(t, err)
			defer lk.Close()
			key := "inspect-" + client

			info, err := lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Held || info.Token != 0 || info.Quorum != 3 || len(info.Nodes) != 5 {
				t.Errorf("never locked: got %+v; want not held, token 0, quorum 3, 5 nodes", info)
			}

			l, err := lk.TryAcquire(ctx, key, lease.WithTTL(5*time.Second))
			require.NoError(t, err)
			defer l.Release(ctx)
			// Votes sent after the majority answered may still be landing.
			for _, s := range srvs {
				waitForKey(t, s, "dlock:{"+key+"}:lock")
			}
			// One node forgets the lock: the quorum still holds it.
			_, err = srvs[0].Do("DEL", "dlock:{"+key+"}:lock")
			require.NoError(t, err)
			info, err = lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Held || info.Owner != l.Owner() || info.Token != l.Token() {
				t.Errorf("held: got owner %s token %v; want %s, %v", info.Owner, info.Token, l.Owner(), l.Token())
			}
			if info.TTL <= 4*time.Second || info.TTL > 5*time.Second {
				t.Errorf("held: TTL = %v; want in (4s, 5s]", info.TTL)
			}
			if n := info.Nodes[0]; n.Owner != "" || n.TTL != 0 || n.Err != nil {
				t.Errorf("node 0 after DEL: got %+v; want free", n)
			}
			// An attempt commits the token on the majority that voted
			// first; the other nodes hold the lock with an older counter.
			for _, n := range info.Nodes[1:] {
				if n.Owner != l.Owner() || n.Counter > l.Token() {
					t.Errorf("node %s: got owner %s counter %v; want %s, <= %v", n.Node, n.Owner, n.Counter, l.Owner(), l.Token())
				}
			}

			require.NoError(t, l.Release(ctx))
			info, err = lk.Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Held || info.Owner != "" || info.TTL != 0 || info.Token != l.Token() {
				t.Errorf("released: got %+v; want not held, last token %v", info, l.Token())
			}
		})
	}
}

func TestInspectNodeDown(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	nodes := make([]node.Node, len(srvs))
	for i, s := range srvs {
		nodes[i] = redistest.NodeFor(t, "go-redis", s.Addr())
	}
	lk, err := redlock.New(nodes, redlock.WithDurableNodes(), redlock.WithNodeTimeout(time.Second))
	require.NoError(t, err)
	defer lk.Close()
	ctx := t.Context()
	l, err := lk.TryAcquire(ctx, "down", lease.WithTTL(5*time.Second))
	require.NoError(t, err)
	defer l.Release(ctx)
	// TryAcquire returned on a majority; let the third vote land, so
	// that the node killed is not one of the two that hold the lock.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		held := 0
		for _, s := range srvs {
			if do(t, s, "GET", "dlock:{down}:lock") == l.Owner() {
				held++
			}
		}
		if held == len(srvs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock on %d of %d nodes after 2s", held, len(srvs))
		}
	}
	srvs[2].Kill()
	info, err := lk.Inspect(ctx, "down")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != l.Owner() {
		t.Errorf("got held %v owner %s; want held by %s", info.Held, info.Owner, l.Owner())
	}
	if info.Nodes[2].Err == nil {
		t.Errorf("killed node: Err = nil; want its failure")
	}
}

func waitForKey(t *testing.T, s *redistest.Server, key string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := s.Do("EXISTS", key)
		require.NoError(t, err)
		if n == "1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not set within 2s", s.Addr(), key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
