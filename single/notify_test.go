package single_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/single"
)

// numsub returns how many subscribers srv counts on channel.
func numsub(t *testing.T, srv *redistest.Server, channel string) string {
	t.Helper()
	out, err := srv.Do("PUBSUB", "NUMSUB", channel)
	require.NoError(t, err)
	return strings.TrimPrefix(out, channel+"\n")
}

// TestNotify: what Publish sends for a key reaches a Watch of that key
// and no other, stores nothing, and a stopped Watch leaves no
// subscription on the server.
func TestNotify(t *testing.T) {
	forEachClient(t, func(t *testing.T, srv *redistest.Server, n node.Node) {
		lk := newLocker(t, n)
		ctx := t.Context()
		msgs, stop, err := lk.Watch(ctx, "news")
		require.NoError(t, err, "Watch")
		require.NoError(t, lk.Publish(ctx, "news", "first"), "Publish")
		if got := redistest.Receive(t, msgs); got != "first" {
			t.Fatalf("got %q; want first", got)
		}
		// Another key's message does not arrive: the next one read is
		// this key's.
		require.NoError(t, lk.Publish(ctx, "other", "not for news"))
		require.NoError(t, lk.Publish(ctx, "news", "second"))
		if got := redistest.Receive(t, msgs); got != "second" {
			t.Fatalf("got %q; want second", got)
		}
		keys, err := srv.Keys()
		require.NoError(t, err)
		if len(keys) != 0 {
			t.Fatalf("keys after publishing: %v; want none", keys)
		}
		channel := single.HashKey("news") + ":notice"
		if got := numsub(t, srv, channel); got != "1" {
			t.Fatalf("subscribers on %s = %s; want 1", channel, got)
		}
		stop()
		deadline := time.Now().Add(5 * time.Second)
		for numsub(t, srv, channel) != "0" {
			if time.Now().After(deadline) {
				t.Fatalf("subscribers on %s after stop: %s; want 0", channel, numsub(t, srv, channel))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestNotifyArgs(t *testing.T) {
	srv := redistest.Start(t)
	lk := newLocker(t, redistest.NodeFor(t, "go-redis", srv.Addr()))
	var nilCtx context.Context // what the test is about; a literal nil would draw a lint
	if err := lk.Publish(nilCtx, "k", "m"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Publish(nil ctx): %v; want ErrInvalid", err)
	}
	if err := lk.Publish(t.Context(), "", "m"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Publish(empty key): %v; want ErrInvalid", err)
	}
	if _, _, err := lk.Watch(nilCtx, "k"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Watch(nil ctx): %v; want ErrInvalid", err)
	}
	if _, _, err := lk.Watch(t.Context(), ""); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Watch(empty key): %v; want ErrInvalid", err)
	}
}

// TestNotifyCluster: on a Redis Cluster, through each cluster client, a
// notice about a lock on each master reaches its watcher.
func TestNotifyCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	for _, c := range cl.Nodes(t) {
		t.Run(c.Name, func(t *testing.T) {
			lk := newLocker(t, c.Node)
			ctx := t.Context()
			for i := range cl.Servers() {
				key := keyOn(t, cl, i, c.Name+"-notice-")
				msgs, stop, err := lk.Watch(ctx, key)
				require.NoError(t, err, "Watch on master %d", i)
				require.NoError(t, lk.Publish(ctx, key, "to "+key), "Publish on master %d", i)
				if got := redistest.Receive(t, msgs); got != "to "+key {
					t.Fatalf("master %d: got %q; want %q", i, got, "to "+key)
				}
				stop()
			}
		})
	}
}
