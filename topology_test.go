package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

// TestOpenCluster opens the single strategy on a 3-master Redis Cluster
// through redis+cluster://, given one node or all three, and locks keys
// that land on every master: each lock's hash lives on the master that
// serves its slot.
func TestOpenCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	addrs := cl.Addrs()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			for _, seeds := range [][]string{addrs[2:], addrs} {
				lk, err := dlock.OpenURL(ctx, "redis+cluster://"+strings.Join(seeds, ",")+"?client="+client)
				require.NoError(t, err, "OpenURL")
				other, err := dlock.OpenURL(ctx, "redis+cluster://"+addrs[0]+"?client="+client)
				require.NoError(t, err, "OpenURL")
				onMaster := make([]bool, len(addrs))
				for i := 0; i < 30; i++ {
					key := client + "-cluster-" + strconv.Itoa(len(seeds)) + "-" + strconv.Itoa(i)
					l, err := lk.TryAcquire(ctx, key)
					if err != nil {
						t.Fatalf("TryAcquire(%q): %v", key, err)
					}
					m := cl.Owner(cl.Slot("dlock:{" + key + "}"))
					if got, _ := cl.Servers()[m].LockField("dlock:{"+key+"}", "owner"); got != l.Owner() {
						t.Fatalf("%q: owner on master %d (its slot's) = %q; want the lease's", key, m, got)
					}
					onMaster[m] = true
					if _, err := other.TryAcquire(ctx, key); !errors.Is(err, dlock.ErrTaken) {
						t.Fatalf("%q: a second Locker's TryAcquire: %v; want ErrTaken", key, err)
					}
					require.NoError(t, l.Release(ctx))
				}
				for m, ok := range onMaster {
					if !ok {
						t.Errorf("no lock landed on master %d out of 30 keys", m)
					}
				}
				require.NoError(t, other.Close())
				require.NoError(t, lk.Close())
			}
		})
	}
}

// TestOpenClusterNotACluster: a cluster URL on a lone server fails at
// Open, rather than running every lock on that one server.
func TestOpenClusterNotACluster(t *testing.T) {
	srv := redistest.Start(t)
	for _, client := range redistest.Clients {
		lk, err := dlock.OpenURL(t.Context(), "redis+cluster://"+srv.Addr()+"?client="+client)
		if err == nil {
			lk.Close()
			t.Errorf("%s: redis+cluster:// on a server without cluster support: no error", client)
		} else if !strings.Contains(err.Error(), "cluster") {
			t.Errorf("%s: error %v; want it to say cluster", client, err)
		}
	}
}
