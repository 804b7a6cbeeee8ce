package dlocktest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// Server is one in-process server (miniredis) on a free port of
// 127.0.0.1, speaking the Redis protocol to any client. Its keys' TTLs
// run down on the wall clock, as on a real server, so a lease nobody
// renews or releases ends after its TTL; and INFO server answers a run_id,
// which dlock's scripts read. Everything else is miniredis's: see the
// package doc for what it does not model.
//
// dlock.Open and OpenURL do not reach it by address: they check each new
// connection with a PING in the inline form, which miniredis does not
// parse. Give Open a Node on a client of your own (Config.Nodes), as the
// example does, or name the address to New.
type Server struct {
	mini *miniredis.Miniredis
	addr string
}

// StartServer starts a Server, for use outside a test's own life: a
// TestMain that shares one server across a package's tests (set
// DLOCK_TEST_ADDR to its Addr), a program, an example. New and Node start
// and close their own. The caller must Close it.
func StartServer() (*Server, error) {
	run := make([]byte, 20)
	_, _ = rand.Read(run) // never fails (crypto/rand)
	info := fmt.Sprintf("# Server\r\nrun_id:%s\r\n", hex.EncodeToString(run))

	m := miniredis.NewMiniRedis()
	// Without this, miniredis's TTLs run down only when told (FastForward):
	// a lease would never expire. With it, every command first expires
	// what the wall clock says is due, so no goroutine has to.
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("dlocktest: start an in-process server: %w", err)
	}
	// miniredis's INFO has no server section. The read-write lock's readers
	// and the quorum's Inspect read run_id from it, in their scripts (which
	// reach commands through the same hook).
	m.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd != "INFO" || len(args) != 1 || !strings.EqualFold(args[0], "server") {
			return false
		}
		c.WriteBulk(info)
		return true
	})
	return &Server{mini: m, addr: m.Addr()}, nil
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Close stops the server and closes its clients' connections; what it
// held is gone. It is safe to call more than once.
func (s *Server) Close() { s.mini.Close() }
