package quorum_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
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
			lk, err := quorum.New(nodes, option.DurableNodes(true), option.NodeTimeout(time.Second))
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

			l, err := lk.TryAcquire(ctx, key, option.TTL(5*time.Second))
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
	lk, err := quorum.New(nodes, option.DurableNodes(true), option.NodeTimeout(time.Second))
	require.NoError(t, err)
	defer lk.Close()
	ctx := t.Context()
	l, err := lk.TryAcquire(ctx, "down", option.TTL(5*time.Second))
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

// TestSitOutReported follows nodes through a sit-out as the public API
// shows it: fresh nodes sit out and say until when, a quorum refused for
// it says why and for how long, the acquire after it repairs them, and a
// node restarted later sits out alone while the others grant.
func TestSitOutReported(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx := t.Context()
			for _, s := range srvs {
				_, err := s.Do("FLUSHALL")
				require.NoError(t, err)
			}
			nodes := make([]node.Node, len(srvs))
			for i, s := range srvs {
				nodes[i] = redistest.NodeFor(t, client, s.Addr())
			}
			const ttl = time.Second
			lk, err := quorum.New(nodes, option.TTL(ttl))
			require.NoError(t, err)
			defer lk.Close()
			// max TTL + node timeout + drift
			sitOut := ttl + settings.QuorumNodeTimeout + 12*time.Millisecond

			// Never voted on: each node would sit out from its first vote.
			info, err := lk.Inspect(ctx, "k")
			require.NoError(t, err)
			for _, n := range info.Nodes {
				if n.Err != nil || n.SitsOut < sitOut-50*time.Millisecond || n.SitsOut > sitOut || n.SinceLoss > 50*time.Millisecond {
					t.Errorf("fresh %s: sits out %v, since loss %v, err %v; want about %v, about 0, nil", n.Node, n.SitsOut, n.SinceLoss, n.Err, sitOut)
				}
			}

			start := time.Now()
			_, err = lk.TryAcquire(ctx, "k")
			var so *quorum.SitOutError
			// Phase 1 stops reading once the quorum is out of reach: the
			// last node may not be awaited.
			if !errors.Is(err, quorum.ErrSitsOut) || !errors.As(err, &so) || so.Nodes < 2 || so.Left <= 0 || so.Left > sitOut {
				t.Fatalf("TryAcquire on fresh nodes: %v; want a *SitOutError of 2 or 3 nodes, left in (0, %v]", err, sitOut)
			}
			if msg := err.Error(); !strings.Contains(msg, "nodes sit out") || !strings.Contains(msg, "vote again in") || !strings.Contains(msg, "sits out for") {
				t.Errorf("message %q; want it to say that 3 nodes sit out, for how long, and each node's time", msg)
			}
			var qe *quorum.Error
			require.ErrorAs(t, err, &qe)
			answered := map[string]bool{}
			for _, a := range qe.Nodes {
				if a.Kind == quorum.KindNotAwaited {
					continue
				}
				answered[a.Node] = true
				var one *quorum.SitOutError
				if a.Kind != quorum.KindSitsOut || !errors.As(a.Err, &one) || one.Nodes != 1 || one.Left <= 0 {
					t.Errorf("node %s: %v %v; want KindSitsOut with its own *SitOutError", a.Node, a.Kind, a.Err)
				}
			}

			// The vote stamped the nodes that answered: their sit-out
			// now runs down. (The call to the one not awaited may have
			// been cut short before it was sent.)
			seen := time.Now()
			info, err = lk.Inspect(ctx, "k")
			require.NoError(t, err)
			// The vote not awaited may land on its node later than the
			// others, and start that node's sit-out later: the wait below
			// runs to the end of the last.
			last := so.Left - time.Since(start)
			for _, n := range info.Nodes {
				last = max(last, n.SitsOut)
				if !answered[n.Node] {
					continue
				}
				if n.SitsOut <= 0 || n.SitsOut > so.Left || n.SinceLoss <= 0 {
					t.Errorf("after the vote %s: sits out %v, since loss %v; want in (0, %v], > 0", n.Node, n.SitsOut, n.SinceLoss, so.Left)
				}
			}
			time.Sleep(last - time.Since(seen) + 20*time.Millisecond)
			info, err = lk.Inspect(ctx, "k")
			require.NoError(t, err)
			for _, n := range info.Nodes {
				if n.SitsOut != 0 || !n.Unrepaired {
					t.Errorf("sat out %s: sits out %v, unrepaired %v; want 0, true", n.Node, n.SitsOut, n.Unrepaired)
				}
			}
			// The first attempt after it repairs the nodes; later ones
			// count them.
			_, err = lk.TryAcquire(ctx, "k")
			if err == nil || !strings.Contains(err.Error(), "not repaired yet; an attempt that hears from a majority repairs them") {
				t.Errorf("first TryAcquire after the sit-out: %v; want a refusal that says the nodes are being repaired", err)
			}
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			l, err := lk.Acquire(actx, "k")
			require.NoError(t, err, "Acquire after the repair")
			require.NoError(t, l.Release(ctx))
			info, err = lk.Inspect(ctx, "k")
			require.NoError(t, err)
			repaired := 0
			for _, n := range info.Nodes {
				if n.SitsOut == 0 && !n.Unrepaired {
					repaired++
				}
			}
			if repaired < lk.Quorum() {
				t.Errorf("after the acquire: %d nodes vote and are repaired; want at least %d: %+v", repaired, lk.Quorum(), info.Nodes)
			}

			// A restart: that node alone sits out, and says so.
			srvs[2].Restart()
			l, err = lk.TryAcquire(ctx, "k")
			require.NoError(t, err, "TryAcquire with one of three restarted")
			require.NoError(t, l.Release(ctx))
			// A client may find its old connection broken once, and
			// report the node's error until it reconnects.
			for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
				info, err = lk.Inspect(ctx, "k")
				require.NoError(t, err)
				if info.Nodes[2].Err == nil || time.Now().After(deadline) {
					break
				}
			}
			// Its vote may not have reached it (a client finds the old
			// connection broken): it then counts from now.
			if n := info.Nodes[2]; n.SitsOut <= 0 || n.SinceLoss > sitOut {
				t.Errorf("restarted %s: sits out %v, since loss %v, err %v; want > 0, at most %v", n.Node, n.SitsOut, n.SinceLoss, n.Err, sitOut)
			}
			if n := info.Nodes[0]; n.SitsOut != 0 || n.Unrepaired {
				t.Errorf("%s: sits out %v, unrepaired %v; want 0, false", n.Node, n.SitsOut, n.Unrepaired)
			}
		})
	}
}
