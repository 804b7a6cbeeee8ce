package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// TestInspectMetadata reads a holder's metadata back through the Locker
// interface, for both strategies: stored with the lock while it is held,
// gone with the lease, and refused past its bound with nothing written.
func TestInspectMetadata(t *testing.T) {
	forEachStrategy(t, func(t *testing.T, lk dlock.Locker) {
		ctx := t.Context()
		const meta = "host=worker-7 pid=4242 job=nightly report"
		l := acquire(t, lk, "meta", option.Metadata(meta))
		if l.Metadata() != meta || !strings.HasSuffix(l.Owner(), " "+meta) {
			t.Errorf("lease: Metadata() = %q, Owner() = %q; want %q, and the owner to end with it", l.Metadata(), l.Owner(), meta)
		}
		info, err := lk.Inspect(ctx, "meta")
		require.NoError(t, err)
		if !info.Held || info.Owner != l.Owner() || info.Metadata != meta || info.Token != l.Token() {
			t.Errorf("held: got %+v; want held by %q with metadata %q, token %v", info, l.Owner(), meta, l.Token())
		}
		// Every server that holds the lock shows the metadata (a quorum's
		// vote may miss a slow server, which then holds nothing).
		holding := 0
		for _, nd := range info.Nodes {
			if nd.Owner == "" {
				continue
			}
			holding++
			if nd.Metadata != meta {
				t.Errorf("held: node %+v; want it to show the metadata", nd)
			}
		}
		if holding == 0 {
			t.Errorf("held: nodes %+v; want some to hold the lock, with the metadata", info.Nodes)
		}
		// The lease works as any other: extended, and released by its
		// owner value, metadata and all.
		require.NoError(t, l.Extend(ctx, parityTTL))
		require.NoError(t, l.Release(ctx))
		info, err = lk.Inspect(ctx, "meta")
		require.NoError(t, err)
		if info.Held || info.Metadata != "" || info.Owner != "" {
			t.Errorf("released: got %+v; want free, no metadata", info)
		}

		// Without metadata: none shown.
		l = acquire(t, lk, "meta")
		info, err = lk.Inspect(ctx, "meta")
		require.NoError(t, err)
		if !info.Held || info.Metadata != "" || l.Metadata() != "" || len(l.Owner()) != 32 {
			t.Errorf("no metadata: got %+v, owner %q; want held, no metadata, a 32-digit owner", info, l.Owner())
		}
		require.NoError(t, l.Release(ctx))

		_, err = lk.TryAcquire(ctx, "meta-long", option.Metadata(strings.Repeat("x", lease.MaxMetadata+1)))
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != "Metadata" || !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("metadata of %d bytes: %v; want an *lease.ArgError naming metadata", lease.MaxMetadata+1, err)
		}
		// Nothing written: the key reads as one never asked for. (Not
		// token 0: on a quorum, a node repaired after its sit-out shows
		// the floor it was repaired to for every key.)
		never, err := lk.Inspect(ctx, "meta-never")
		require.NoError(t, err)
		if info, err := lk.Inspect(ctx, "meta-long"); err != nil || info.Held || info.Token != never.Token {
			t.Errorf("after the refused metadata: %+v, %v; want never locked, as %+v", info, err, never)
		}
		l = acquire(t, lk, "meta-max", option.Metadata(strings.Repeat("x", lease.MaxMetadata)))
		require.NoError(t, l.Release(ctx))
	})
}

// TestOpenInspect reaches Inspect from what OpenURL returns, for both
// strategies.
func TestOpenInspect(t *testing.T) {
	srv := redistest.Start(t)
	quorum := redistest.StartN(t, 3)
	urls := map[string]string{
		"single": "redis://" + srv.Addr() + "?ttl=2s",
		"quorum": "quorum://" + quorum[0].Addr() + "," + quorum[1].Addr() + "," + quorum[2].Addr() + "?ttl=2s",
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			lk, err := dlock.OpenURL(ctx, url)
			require.NoError(t, err)
			defer lk.Close()
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := lk.Acquire(actx, "open-inspect", option.Metadata("job=open"))
			require.NoError(t, err)
			info, err := lk.Inspect(ctx, "open-inspect")
			require.NoError(t, err)
			if !info.Held || info.Metadata != "job=open" || info.Token != l.Token() || info.TTL <= 0 || info.TTL > 2*time.Second {
				t.Errorf("got %+v; want held, metadata job=open, token %v, TTL in (0, 2s]", info, l.Token())
			}
			require.NoError(t, l.Release(ctx))
		})
	}
}
