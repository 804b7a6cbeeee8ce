package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// receiveAll returns the messages that arrive on msgs until want has
// come, failing t when it does not come in a few seconds (a bound on a
// hang, not a measure of speed).
func receiveAll(t *testing.T, msgs <-chan string, want string) []string {
	t.Helper()
	var got []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-msgs:
			got = append(got, m)
			if m == want {
				return got
			}
		case <-timeout:
			t.Fatalf("received %q; want %q among them", got, want)
		}
	}
}

// TestNotify: a notice published on a quorum reaches a Watch, while a
// majority of the nodes lives; with a majority gone, Publish and a new
// Watch fail; after Close, both say ErrClosed. Nothing is stored.
func TestNotify(t *testing.T) {
	forEachClient(t, func(t *testing.T, client string) {
		srvs := redistest.StartN(t, 5)
		lk := newLocker(t, nodesOn(t, srvs, client), option.DurableNodes(true))
		ctx := t.Context()
		msgs, stop, err := lk.Watch(ctx, "news")
		require.NoError(t, err, "Watch")
		defer stop()
		require.NoError(t, lk.Publish(ctx, "news", "all up"), "Publish")
		receiveAll(t, msgs, "all up")
		require.NoError(t, lk.Publish(ctx, "other", "not for news"))
		require.NoError(t, lk.Publish(ctx, "news", "second"))
		for _, m := range receiveAll(t, msgs, "second") {
			if m != "all up" && m != "second" {
				t.Fatalf("got %q, published for another key", m)
			}
		}
		for i, s := range srvs {
			keys, err := s.Keys()
			require.NoError(t, err)
			if len(keys) != 0 {
				t.Fatalf("node %d keeps %v after publishing; want nothing", i, keys)
			}
		}

		srvs[0].Kill()
		srvs[1].Kill()
		require.NoError(t, lk.Publish(ctx, "news", "two down"), "Publish with two of five down")
		receiveAll(t, msgs, "two down")

		srvs[2].Kill()
		if err := lk.Publish(ctx, "news", "three down"); err == nil {
			t.Fatal("Publish with three of five down: nil; want an error")
		}
		// A Watch shares each node's subscription to a channel, which
		// the first one keeps: the new one is of another key, so it
		// must ask the nodes.
		if _, _, err := lk.Watch(ctx, "more news"); err == nil {
			t.Fatal("Watch with three of five down: nil; want an error")
		}

		require.NoError(t, lk.Close())
		if err := lk.Publish(ctx, "news", "closed"); !errors.Is(err, quorum.ErrClosed) {
			t.Fatalf("Publish after Close: %v; want ErrClosed", err)
		}
		if _, _, err := lk.Watch(ctx, "news"); !errors.Is(err, quorum.ErrClosed) {
			t.Fatalf("Watch after Close: %v; want ErrClosed", err)
		}
	})
}

func TestNotifyArgs(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	lk := newLocker(t, nodesOn(t, srvs, "go-redis"), option.DurableNodes(true))
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

// TestNotifyNodeTimeoutIsNotADeadline: with three of five nodes stopped,
// Publish and Watch fail on the nodes' timeouts, which are not the end
// of the caller's context: their errors match no context error while
// the caller's context lives.
func TestNotifyNodeTimeoutIsNotADeadline(t *testing.T) {
	t.Parallel()
	forEachClient(t, func(t *testing.T, client string) {
		srvs := redistest.StartN(t, 5)
		// Each call on clients of its own: a go-redis (RESP3) call that
		// follows a timed-out one on a stopped server may block past its
		// ctx, reading pending pushes.
		lk := newLocker(t, nodesOn(t, srvs, client), option.DurableNodes(true))
		wlk := newLocker(t, nodesOn(t, srvs, client), option.DurableNodes(true))
		require.NoError(t, wlk.Publish(t.Context(), "warm", "m"), "Publish before the pause")
		for _, s := range srvs[2:] {
			resume := s.PauseOnce()
			t.Cleanup(resume) // before the servers' own cleanup
			defer resume()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := lk.Publish(ctx, "stopped", "m")
		if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("Publish, 3 of 5 nodes stopped: %v; want an error that is no context error", err)
		}
		// A go-redis subscription to a stopped server may outlast its
		// node timeout, and then the caller's ctx ends the Watch: only
		// then may its error match the deadline.
		wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer wcancel()
		_, _, err = wlk.Watch(wctx, "stopped")
		// The caller's deadline may have passed before its timer fired
		// (wctx.Err() still nil): that is the caller's deadline too.
		wdl, _ := wctx.Deadline()
		ended := wctx.Err() != nil || !time.Now().Before(wdl)
		if err == nil || (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && !ended {
			t.Errorf("Watch, 3 of 5 nodes stopped: %v; want an error that is no context error", err)
		}
		if ended {
			t.Logf("Watch outlasted its ctx on %s: %v", client, err)
		}
	})
}
