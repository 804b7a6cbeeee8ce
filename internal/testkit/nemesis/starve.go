package nemesis

import (
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/safety"
)

const (
	// starveTick is how often the watcher asks to wake.
	starveTick = 10 * time.Millisecond
	// starveLate is how late a wake must be for the process to count as
	// starved: far past a busy machine's scheduling noise, and well
	// short of the rate callers' deadlines.
	starveLate = 50 * time.Millisecond
)

// starvation watches the test process's own scheduling: a goroutine that
// asks to wake every starveTick, and records each wake later than
// starveLate as a stretch in which the process could not run its workers
// either (a machine loaded by other work, a long stop of the world). The
// RATE floor does not judge those stretches (floorSettle past each, as
// after a fault): a caller that cannot run calls no limit, and a loaded
// machine then shows as such in the report, not as a floor broken. No
// other promise is excused by them.
type starvation struct {
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	spans []safety.Span
}

// watchStarvation starts the watcher; spans stops it.
func watchStarvation() *starvation {
	s := &starvation{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(starveTick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				s.observe(last, time.Now())
				last = now
			}
		}
	}()
	return s
}

// observe records a wake at woke for a tick due starveTick after last,
// when it is starveLate late or more.
func (s *starvation) observe(last, woke time.Time) {
	due := last.Add(starveTick)
	if woke.Sub(due) < starveLate {
		return
	}
	s.mu.Lock()
	s.spans = append(s.spans, safety.Span{From: due, To: woke.Add(floorSettle)})
	s.mu.Unlock()
}

// close stops the watcher and returns the stretches it found.
func (s *starvation) close() []safety.Span {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return safety.MergeSpans(s.spans)
}
