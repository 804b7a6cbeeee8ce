// Package subconn is the subscription half of a Node whose client lends it
// a connection of its own for SUBSCRIBE (valkey-go, rueidis, redigo): it
// opens that connection on first use, opens another (with every channel
// that has listeners subscribed again) when it breaks, and closes it on
// Close. The client-specific part is a Dial.
package subconn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/node/internal/hub"
)

// Conn is one subscription connection.
type Conn interface {
	// Subscribe subscribes the connection to channels and returns once the
	// server confirmed it.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe ends the connection's subscription to channel.
	Unsubscribe(ctx context.Context, channel string) error
	// Close closes the connection, and returns once nothing it started
	// runs any more.
	Close()
}

// Dial opens a subscription connection that hands each message it
// receives to notify. The channel it returns receives, or is closed, when
// the connection breaks.
type Dial func(ctx context.Context, notify func(channel, message string)) (Conn, <-chan error, error)

// Subs is a Node's subscriptions over one connection.
type Subs struct {
	hub  *hub.Hub
	dial Dial

	mu   sync.Mutex
	conn Conn          // current subscription connection, nil while down
	errs <-chan error  // reports conn breaking
	quit chan struct{} // closed by Close to end watch
	done chan struct{} // closed by watch when it ends
}

// New returns the subscriptions of a Node that opens its connections with
// dial.
func New(dial Dial) *Subs { return &Subs{hub: hub.New(), dial: dial} }

// Subscribe is node.Node's Subscribe.
func (s *Subs) Subscribe(ctx context.Context, channel string) (<-chan string, func(), error) {
	return s.hub.Subscribe(ctx, channel, s.subscribe, s.unsubscribe)
}

// subscribe runs under hub.sem, as do connect and every other use of s.conn.
func (s *Subs) subscribe(ctx context.Context, channel string) error {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		var err error
		if c, err = s.connect(ctx); err != nil {
			return err
		}
	}
	return c.Subscribe(ctx, channel)
}

func (s *Subs) unsubscribe(ctx context.Context, channel string) error {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Unsubscribe(ctx, channel)
}

// connect opens a subscription connection, subscribes it to every channel
// that has listeners, and makes sure the watch goroutine runs. It runs under
// hub.sem.
func (s *Subs) connect(ctx context.Context) (Conn, error) {
	if s.hub.IsClosed() {
		return nil, node.ErrClosed
	}
	c, errs, err := s.dial(ctx, s.hub.Notify)
	if err != nil {
		return nil, err
	}
	if chans := s.hub.Channels(); len(chans) > 0 {
		if err := c.Subscribe(ctx, chans...); err != nil {
			c.Close()
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hub.IsClosed() {
		c.Close()
		return nil, node.ErrClosed
	}
	s.conn, s.errs = c, errs
	if s.done == nil {
		s.quit, s.done = make(chan struct{}), make(chan struct{})
		go s.watch(s.quit, s.done)
	}
	return c, nil
}

// watch is the Node's one subscription goroutine: when the subscription
// connection breaks it opens another, until Close closes quit.
func (s *Subs) watch(quit, done chan struct{}) {
	defer close(done)
	for {
		s.mu.Lock()
		errs := s.errs
		s.mu.Unlock()
		select {
		case <-quit:
			return
		case <-errs:
		}
		s.mu.Lock()
		if s.errs == errs {
			s.conn.Close()
			s.conn, s.errs = nil, nil
		}
		s.mu.Unlock()
		for !s.reconnect(quit) {
		}
		select {
		case <-quit:
			return
		default:
		}
	}
}

// reconnect makes one attempt, after a pause so a server that is down does
// not turn watch into a busy loop; it reports whether watch can go back to
// waiting (connected, or closing).
func (s *Subs) reconnect(quit chan struct{}) bool {
	select {
	case <-quit:
		return true
	case <-time.After(100 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.hub.Lock(ctx) != nil {
		return false
	}
	defer s.hub.Unlock()
	s.mu.Lock()
	up := s.conn != nil
	s.mu.Unlock()
	if up {
		return true
	}
	_, err := s.connect(ctx)
	return err == nil || errors.Is(err, node.ErrClosed)
}

// Close ends the subscriptions and closes the connection; it returns once
// the Node's subscription goroutines ended. A second Close does nothing.
func (s *Subs) Close() {
	if !s.hub.Close() {
		return
	}
	defer s.hub.Wait()
	s.mu.Lock()
	c, quit, done := s.conn, s.quit, s.done
	s.conn, s.errs = nil, nil
	s.mu.Unlock()
	if quit == nil {
		return
	}
	close(quit)
	<-done
	if c != nil {
		c.Close()
	}
}
