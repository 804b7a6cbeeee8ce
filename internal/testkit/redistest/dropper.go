package redistest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/goredis"
)

// Dropper is a TCP proxy in front of one server that loses replies on
// demand: the server runs every command it is sent, but the replies chosen
// by Drop never reach the client, whose connection is closed instead, as by
// a network that fails right after the server answered. The client reads
// EOF for a command that ran, which is when go-redis (with its default
// MaxRetries) sends the command again.
//
// A reply is one read from the server: right for clients that wait for each
// reply before sending the next command, as the tests that use a Dropper
// arrange. Its methods are safe for concurrent use.
type Dropper struct {
	t  testing.TB
	ln net.Listener
	up string

	mu      sync.Mutex
	skip    int // replies to pass before dropping
	drop    int // replies to drop after those
	dropped int
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// StartDropper starts a Dropper on a free port of 127.0.0.1 forwarding to
// upstream (host:port). It is stopped, and its connections closed, when
// the test ends.
func StartDropper(t testing.TB, upstream string) *Dropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: dropper listen: %v", err)
	}
	d := &Dropper{t: t, ln: ln, up: upstream, conns: make(map[net.Conn]struct{})}
	d.wg.Add(1)
	go d.accept()
	t.Cleanup(d.close)
	return d
}

// Addr returns the Dropper's host:port, to give clients instead of the
// server's.
func (d *Dropper) Addr() string { return d.ln.Addr().String() }

// Drop makes the Dropper pass the next skip replies and then drop the n
// after them, whichever connections they come on.
func (d *Dropper) Drop(skip, n int) {
	d.mu.Lock()
	d.skip, d.drop = skip, n
	d.mu.Unlock()
}

// Dropped returns how many replies were dropped since the Dropper started.
func (d *Dropper) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

func (d *Dropper) accept() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", d.up)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !d.track(c, s) {
			return
		}
		d.wg.Add(2)
		go func() {
			defer d.wg.Done()
			_, _ = io.Copy(s, c)
			_ = s.Close()
		}()
		go func() {
			defer d.wg.Done()
			d.replies(c, s)
			_ = c.Close()
			d.untrack(c, s)
		}()
	}
}

// replies forwards s's replies to c until one is dropped or either side
// closes.
func (d *Dropper) replies(c, s net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if d.lose() {
				_ = s.Close()
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = s.Close()
			}
			return
		}
	}
}

// lose reports whether the reply just read is to be dropped.
func (d *Dropper) lose() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.skip > 0:
		d.skip--
		return false
	case d.drop > 0:
		d.drop--
		d.dropped++
		return true
	}
	return false
}

func (d *Dropper) track(c, s net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	d.conns[c] = struct{}{}
	d.conns[s] = struct{}{}
	return true
}

func (d *Dropper) untrack(c, s net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	delete(d.conns, s)
	d.mu.Unlock()
}

func (d *Dropper) close() {
	_ = d.ln.Close()
	d.mu.Lock()
	d.closed = true
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// GoRedis returns a Node through d on a go-redis client with the client's
// default options, as a user's would be: MaxRetries 3, so that it sends a
// command again when its reply is lost; and CLIENT SETINFO on each new
// connection, which the Dropper counts as a reply (load the scripts a
// test drops the replies of first: a NOSCRIPT answer is one too). Both
// are closed when the test ends.
func (d *Dropper) GoRedis(t testing.TB) node.Node {
	c := redis.NewClient(&redis.Options{Addr: d.Addr()})
	n := goredis.New(c)
	t.Cleanup(func() {
		_ = n.Close()
		_ = c.Close()
	})
	return n
}
