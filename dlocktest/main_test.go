package dlocktest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	// The in-process cases must be in-process whatever the shell names;
	// TestEnv sets the variables itself.
	os.Unsetenv(dlocktest.EnvAddr)
	os.Unsetenv(dlocktest.EnvAddrs)
	goleak.VerifyTestMain(m)
}

// backend is where a test's Lockers and Nodes live.
type backend struct {
	name string
	// opts returns the options that put one test's servers there: one
	// server, or a quorum of n when n > 0.
	opts func(t *testing.T, n int) []dlocktest.Option
}

var backends = []backend{
	{"in-process", func(t *testing.T, n int) []dlocktest.Option {
		if n > 0 {
			return []dlocktest.Option{dlocktest.WithQuorum(n)}
		}
		return nil
	}},
	{"real", func(t *testing.T, n int) []dlocktest.Option {
		if n == 0 {
			return []dlocktest.Option{dlocktest.WithAddr(redistest.Start(t).Addr())}
		}
		var addrs []string
		for _, s := range redistest.StartN(t, n) {
			addrs = append(addrs, s.Addr())
		}
		return []dlocktest.Option{dlocktest.WithQuorum(n), dlocktest.WithAddr(addrs...)}
	}},
}

// forEach runs f on every backend with every client library, on one
// server (n == 0) or a quorum of n; every New and Node of one run of f
// must be given opts, so that they share its servers.
func forEach(t *testing.T, n int, f func(t *testing.T, opts ...dlocktest.Option)) {
	t.Helper()
	for _, b := range backends {
		for _, client := range []string{connect.ClientGoRedis, connect.ClientValkeyGo} {
			t.Run(b.name+"/"+client, func(t *testing.T) {
				t.Parallel()
				f(t, append(b.opts(t, n), dlocktest.WithClient(client))...)
			})
		}
	}
}
