package single_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	"github.com/dlockgo/dlock/node/valkeygo"
	"github.com/dlockgo/dlock/option"
)

// nodeAs returns a Node for addr on client that logs in as user.
func nodeAs(t *testing.T, client, addr, user, password string) node.Node {
	t.Helper()
	switch client {
	case "go-redis":
		c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, DisableIdentity: true})
		n := goredis.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			_ = c.Close()
		})
		return n
	case "valkey-go":
		c, err := valkey.NewClient(valkey.ClientOption{
			InitAddress: []string{addr}, Username: user, Password: password, DisableCache: true,
		})
		require.NoError(t, err, "valkey-go client as %s", user)
		n := valkeygo.New(c)
		t.Cleanup(func() {
			_ = n.Close()
			c.Close()
		})
		return n
	}
	t.Fatalf("unknown client %q", client)
	return nil
}

// TestReplicasWaitRefused: with option.Replicas, a WAIT the server refuses
// (here the ACL denies it) comes after the claim ran and granted the lock.
// The acquire fails, and the claim must not be left holding the lock.
func TestReplicasWaitRefused(t *testing.T) {
	srv := redistest.Start(t)
	_, err := srv.Do("ACL", "SETUSER", "nowait", "on", ">pw", "~*", "&*", "+@all", "-wait")
	require.NoError(t, err)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			lk := newLocker(t, nodeAs(t, client, srv.Addr(), "nowait", "pw"),
				option.Replicas(1, 100*time.Millisecond))
			key := "nowait-" + client
			refused := func(what string, err error) {
				t.Helper()
				var re *node.ReplyError
				if !errors.As(err, &re) || !strings.Contains(re.Msg, "NOPERM") {
					t.Fatalf("%s: %v; want the WAIT's NOPERM reply", what, err)
				}
				if got := field(t, srv, key, "owner"); got != "" {
					t.Fatalf("%s: owner = %q after the acquire failed; want none", what, got)
				}
			}
			_, err := lk.TryAcquire(t.Context(), key)
			refused("TryAcquire", err)

			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err = lk.Acquire(ctx, key)
			refused("Acquire", err)
		})
	}
}
