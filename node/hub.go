package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by a Node's Subscribe after Close.
var ErrClosed = errors.New("node: closed")

// ErrCrossSlot is returned by Pipeline on a cluster client when a WAIT is
// asked for and the calls' keys are spread so that no single connection can
// carry them all (see FromGoRedis and FromValkey for each client's rule).
var ErrCrossSlot = errors.New("node: pipeline with WAIT spans more than one cluster slot")

// hub is the client-independent half of Subscribe: which local subscribers
// listen on which channel, and the coalescing signal to each.
type hub struct {
	// sem serialises changes to the server-side subscription set, so a
	// SUBSCRIBE and an UNSUBSCRIBE of one channel reach the server in the
	// order their refcount changes were made. It is a channel so waiting for
	// it can give up with the caller's context.
	sem chan struct{}

	mu     sync.Mutex
	topics map[string]map[*listener]struct{}
	closed bool
}

type listener struct {
	c chan struct{}
}

func newHub() *hub {
	return &hub{sem: make(chan struct{}, 1), topics: make(map[string]map[*listener]struct{})}
}

func (h *hub) lock(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hub) unlock() { <-h.sem }

// add registers a listener on channel; first reports whether it is the
// channel's only one, so the caller must SUBSCRIBE.
func (h *hub) add(channel string) (l *listener, first bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, ErrClosed
	}
	l = &listener{c: make(chan struct{}, 1)}
	set := h.topics[channel]
	if set == nil {
		set = make(map[*listener]struct{})
		h.topics[channel] = set
	}
	set[l] = struct{}{}
	return l, len(set) == 1, nil
}

// remove unregisters l; last reports whether channel has no listener left,
// so the caller should UNSUBSCRIBE.
func (h *hub) remove(channel string, l *listener) (last bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
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
func (h *hub) active(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics[channel]) > 0
}

// channels lists the channels with listeners, for a resubscribe after
// reconnecting.
func (h *hub) channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.topics))
	for ch := range h.topics {
		out = append(out, ch)
	}
	return out
}

// notify signals every listener on channel without blocking: a listener
// that has a signal pending keeps just that one.
func (h *hub) notify(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.topics[channel] {
		select {
		case l.c <- struct{}{}:
		default:
		}
	}
}

// close marks the hub closed and reports whether it was open.
func (h *hub) close() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := !h.closed
	h.closed = true
	return was
}

// subscribe is the shared body of Subscribe: register, ask the backend to
// SUBSCRIBE when the channel is new (under sem), and build stop. sub must
// return only once the server confirmed the subscription; unsub may be
// best-effort.
func (h *hub) subscribe(ctx context.Context, channel string,
	sub func(ctx context.Context, channel string) error,
	unsub func(ctx context.Context, channel string) error,
) (<-chan struct{}, func(), error) {
	if err := h.lock(ctx); err != nil {
		return nil, nil, err
	}
	l, first, err := h.add(channel)
	if err == nil && first {
		if err = sub(ctx, channel); err != nil && h.remove(channel, l) {
			// The SUBSCRIBE may have reached the server all the same.
			uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			_ = unsub(uctx, channel)
			cancel()
		}
	}
	h.unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("node: subscribe %q: %w", channel, ctxErr(ctx, err))
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			if h.lock(ctx) != nil {
				h.remove(channel, l)
				return
			}
			defer h.unlock()
			if h.remove(channel, l) {
				_ = unsub(ctx, channel)
			}
		})
	}
	return l.c, stop, nil
}

// ctxErr keeps a context's end recognisable by errors.Is when a client
// reports it as a network timeout or its own error instead.
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// unsubscribeTimeout bounds the UNSUBSCRIBE a stop sends: stop takes no
// context, and a hung server must not hang it.
const unsubscribeTimeout = time.Second

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
