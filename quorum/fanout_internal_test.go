package quorum

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRoundNextPrefersAnswer: an answer already delivered when the round's
// timer and context have fired is reported as it is, not as a silent node.
// No server can time this case, so the round is built by hand.
func TestRoundNextPrefersAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var wg sync.WaitGroup
	for range 200 {
		r := &round{ch: make(chan result, 1), start: time.Now(), ctx: ctx, wg: &wg,
			pending: []int{0}, seen: make([]bool, 1), timer: time.NewTimer(0)}
		time.Sleep(10 * time.Microsecond)
		r.ch <- result{i: 0}
		if a := r.next(); a.synthetic || a.err != nil {
			t.Fatalf("next = %+v; want the answer delivered in time", a)
		}
		r.timer.Stop()
	}
}
