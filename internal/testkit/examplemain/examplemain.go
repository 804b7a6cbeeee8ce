// Package examplemain starts the servers a package's runnable examples
// lock on, before the package's tests run, and names them in the
// environment the examples read, as a reader running them would set it:
// DLOCK_ADDR, one server's host:port, and DLOCK_ADDRS, a quorum's,
// comma-separated. An example falls back to local servers when they are
// unset; here they are always set, to servers of the tests' own, so that
// no example writes to a server the reader already runs.
package examplemain

import (
	"fmt"
	"os"
	"strings"

	"github.com/dlockgo/dlock/internal/redisproc"
)

// TestingM is what a TestMain runs: *testing.M.
type TestingM interface{ Run() int }

// With returns m, run with n servers (redisproc.Start with args, each in a
// folder of its own) named in DLOCK_ADDR (the first) and DLOCK_ADDRS (all),
// and stopped when m returns: for goleak.VerifyTestMain(With(m, 1)).
func With(m TestingM, n int, args ...string) TestingM { return run{m, n, args} }

type run struct {
	m    TestingM
	n    int
	args []string
}

func (r run) Run() int {
	dir, err := os.MkdirTemp("", "dlock-examples")
	if err != nil {
		fmt.Fprintln(os.Stderr, "examplemain:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var addrs []string
	for i := range r.n {
		d := fmt.Sprintf("%s/%d", dir, i)
		if err := os.Mkdir(d, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, "examplemain:", err)
			return 1
		}
		addr, stop, err := redisproc.Start(append([]string{"--dir", d}, r.args...)...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "examplemain: a server for the examples:", err)
			return 1
		}
		defer stop()
		addrs = append(addrs, addr)
	}
	os.Setenv("DLOCK_ADDR", addrs[0])
	os.Setenv("DLOCK_ADDRS", strings.Join(addrs, ","))
	return r.m.Run()
}
