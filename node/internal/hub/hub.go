// Package hub is the client-independent half of a Node's Subscribe: which
// local subscribers listen on which channel, the coalescing signal to each,
// and the order of the server-side SUBSCRIBEs and UNSUBSCRIBEs.
package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/node"
)

// Hub is the client-independent half of Subscribe: which local subscribers
// listen on which channel, and the coalescing signal to each.
type Hub struct {
	// sem serialises changes to the server-side subscription set, so a
	// SUBSCRIBE and an UNSUBSCRIBE of one channel reach the server in the
	// order their refcount changes were made. It is a channel so waiting for
	// it can give up with the caller's context.
	sem chan struct{}

	mu       sync.Mutex
	topics   map[string]map[*listener]struct{}
	closed   bool
	pending  map[string]struct{} // Channels left by their last listener, to UNSUBSCRIBE
	draining bool                // drain runs
	quit     chan struct{}       // closed by close
	wg       sync.WaitGroup      // drain, waited for by wait
}

type listener struct {
	c chan string // the latest message not read yet
}

func New() *Hub {
	return &Hub{sem: make(chan struct{}, 1), topics: make(map[string]map[*listener]struct{}),
		pending: make(map[string]struct{}), quit: make(chan struct{})}
}

func (h *Hub) Lock(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Hub) Unlock() { <-h.sem }

// add registers a listener on channel; first reports whether it is the
// channel's only one, so the caller must SUBSCRIBE.
func (h *Hub) add(channel string) (l *listener, first bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, node.ErrClosed
	}
	l = &listener{c: make(chan string, 1)}
	set := h.topics[channel]
	if set == nil {
		set = make(map[*listener]struct{})
		h.topics[channel] = set
	}
	set[l] = struct{}{}
	return l, len(set) == 1, nil
}

// remove unregisters l and, when channel has no listener left, queues its
// UNSUBSCRIBE, which drain sends with unsub once it holds sem: waiting for
// sem here would hold up the caller behind a call to a hung server, and
// giving up would leave the server subscribed for the Node's lifetime.
func (h *Hub) remove(channel string, l *listener, unsub func(ctx context.Context, channel string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.removeLocked(channel, l) {
		return
	}
	h.pending[channel] = struct{}{}
	if !h.draining {
		h.draining = true
		h.wg.Add(1)
		go h.drain(unsub)
	}
}

// drain sends the queued UNSUBSCRIBEs, each under sem and only while its
// channel still has no listener (a Subscribe since then has sent its own
// SUBSCRIBE, which must stand), until none is left or the hub closes.
func (h *Hub) drain(unsub func(ctx context.Context, channel string) error) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		channel, ok := "", false
		for c := range h.pending {
			channel, ok = c, true
			break
		}
		if !ok || h.closed {
			h.draining = false
			h.mu.Unlock()
			return
		}
		delete(h.pending, channel)
		h.mu.Unlock()
		select {
		case h.sem <- struct{}{}:
		case <-h.quit:
			h.mu.Lock()
			h.draining = false
			h.mu.Unlock()
			return
		}
		if !h.active(channel) && !h.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			_ = unsub(ctx, channel)
			cancel()
		}
		h.Unlock()
	}
}

// Wait waits for drain to end; the caller has closed the hub.
func (h *Hub) Wait() { h.wg.Wait() }

// removeLocked unregisters l; it reports whether channel has no listener
// left, so the server subscription should end.
func (h *Hub) removeLocked(channel string, l *listener) (last bool) {
	set, ok := h.topics[channel]
	if !ok {
		return false
	}
	if _, ok := set[l]; !ok {
		return false
	}
	delete(set, l)
	if len(set) == 0 {
		delete(h.topics, channel)
		return !h.closed
	}
	return false
}

// active reports whether channel has listeners now.
func (h *Hub) active(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics[channel]) > 0
}

// Channels lists the channels with listeners, for a resubscribe after
// reconnecting.
func (h *Hub) Channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.topics))
	for ch := range h.topics {
		out = append(out, ch)
	}
	return out
}

// Notify hands msg to every listener on channel without blocking: a
// listener that has a message pending finds msg in its place.
func (h *Hub) Notify(channel, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.topics[channel] {
		select {
		case l.c <- msg:
			continue
		default:
		}
		select {
		case <-l.c:
		default:
		}
		select {
		case l.c <- msg:
		default: // another sender took the room: drop msg, never block
		}
	}
}

// Close marks the hub closed and reports whether it was open.
func (h *Hub) Close() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := !h.closed
	if was {
		h.closed = true
		close(h.quit)
	}
	return was
}

// Subscribe is the shared body of Subscribe: register, ask the backend to
// SUBSCRIBE when the channel is new (under sem), and build stop, which
// returns at once (see remove). sub must
// return only once the server confirmed the subscription; unsub may be
// best-effort.
func (h *Hub) Subscribe(ctx context.Context, channel string,
	sub func(ctx context.Context, channel string) error,
	unsub func(ctx context.Context, channel string) error,
) (<-chan string, func(), error) {
	if err := h.Lock(ctx); err != nil {
		return nil, nil, err
	}
	l, first, err := h.add(channel)
	if err == nil && first {
		if err = sub(ctx, channel); err != nil {
			// The SUBSCRIBE may have reached the server all the same.
			h.remove(channel, l, unsub)
		}
	}
	h.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("node: subscribe %q: %w", channel, ctxerr.Wrap(ctx, err))
	}
	var once sync.Once
	stop := func() { once.Do(func() { h.remove(channel, l, unsub) }) }
	return l.c, stop, nil
}

// unsubscribeTimeout bounds each UNSUBSCRIBE drain sends: a hung server
// must not hold sem for long.
const unsubscribeTimeout = time.Second

func (h *Hub) IsClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
