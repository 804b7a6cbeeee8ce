package node_test

import (
	"errors"
	"testing"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
	redigonode "github.com/dlockgo/dlock/node/redigo"
	rueidisnode "github.com/dlockgo/dlock/node/rueidis"
	"github.com/dlockgo/dlock/node/valkeygo"
)

// TestErrAuth: a server that refuses the credentials (WRONGPASS) or asks
// for some (NOAUTH) answers with an error matching ErrAuth, through every
// adapter; an other refusal does not match it.
func TestErrAuth(t *testing.T) {
	srv := redistest.Start(t)
	_, err := srv.Do("ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all")
	require.NoError(t, err)
	_, err = srv.Do("ACL", "SETUSER", "default", "on", ">pw")
	require.NoError(t, err)
	goRedis := func(user, pass string) node.Node {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: pass, DisableIdentity: true})
		n := goredis.New(c)
		t.Cleanup(func() { _ = n.Close(); _ = c.Close() })
		return n
	}
	valkeyGo := func(user, pass string) node.Node {
		// With ForceSingleClient, NewClient returns a client even when
		// its first connection failed, as dlock.Open relies on.
		c, _ := valkey.NewClient(valkey.ClientOption{InitAddress: []string{srv.Addr()}, Username: user, Password: pass,
			DisableCache: true, ForceSingleClient: true})
		require.NotNil(t, c)
		n := valkeygo.New(c)
		t.Cleanup(func() { _ = n.Close(); c.Close() })
		return n
	}
	rueidisGo := func(user, pass string) node.Node {
		c, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Username: user, Password: pass,
			DisableCache: true, ForceSingleClient: true})
		require.NotNil(t, c)
		n := rueidisnode.New(c)
		t.Cleanup(func() { _ = n.Close(); c.Close() })
		return n
	}
	redigo := func(user, pass string) node.Node {
		var opts []redigoredis.DialOption
		if pass != "" {
			opts = append(opts, redigoredis.DialUsername(user), redigoredis.DialPassword(pass))
		}
		p := redistest.RedigoPool(srv.Addr(), opts...)
		n := redigonode.New(p, srv.Addr())
		t.Cleanup(func() { _ = n.Close(); _ = p.Close() })
		return n
	}
	for _, tc := range []struct {
		name       string
		user, pass string
		auth       bool
	}{
		{"wrong password", "alice", "nope", true},
		{"no password", "", "", true},
		{"right password", "alice", "s3cret", false},
	} {
		for name, mk := range map[string]func(user, pass string) node.Node{
			"go-redis": goRedis, "valkey-go": valkeyGo, "rueidis": rueidisGo, "redigo": redigo} {
			_, err := mk(tc.user, tc.pass).Eval(t.Context(), refuse, nil, "x")
			var re *node.ReplyError
			if got := errors.Is(err, node.ErrAuth); got != tc.auth || !errors.As(err, &re) {
				t.Errorf("%s, %s: Eval = %v: errors.Is(ErrAuth) = %v; want %v, and a *ReplyError", name, tc.name, err, got, tc.auth)
			}
		}
	}
}
