// Package events keeps what a observe.Observer hears, for the tests of the
// packages that report to one.
package events

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"
)

// Recorder is a observe.Observer that keeps every event, safe for the
// goroutines that report (a lease's renewal, a quorum's nodes) while a
// test reads. Its zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []observe.Event
}

// Observe keeps e.
func (r *Recorder) Observe(e observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Take returns the events recorded so far and forgets them.
func (r *Recorder) Take() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// Events returns the events recorded so far, keeping them.
func (r *Recorder) Events() []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Has reports whether an event of kind with error err is kept.
func (r *Recorder) Has(kind observe.EventKind, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e observe.Event) bool { return e.Kind == kind && e.Err == err })
}

// WaitFor returns the first event of kind, waiting up to 3 s for it, and
// forgets the events recorded until then. It fails t when none comes.
func (r *Recorder) WaitFor(t testing.TB, kind observe.EventKind) observe.Event {
	t.Helper()
	var got []observe.Event
	for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(10 * time.Millisecond) {
		got = append(got, r.Take()...)
		if i := slices.IndexFunc(got, func(e observe.Event) bool { return e.Kind == kind }); i >= 0 {
			return got[i]
		}
	}
	t.Fatalf("no %v event in 3s; got %v", kind, Kinds(got))
	return observe.Event{}
}

// Kinds returns the kind of each of ev, in order.
func Kinds(ev []observe.Event) []observe.EventKind {
	k := make([]observe.EventKind, len(ev))
	for i, e := range ev {
		k[i] = e.Kind
	}
	return k
}

// Without returns ev less its events of kind.
func Without(ev []observe.Event, kind observe.EventKind) []observe.Event {
	return slices.DeleteFunc(slices.Clone(ev), func(e observe.Event) bool { return e.Kind == kind })
}
