package nemesis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStarvationObserve: a wake on time, or late by less than starveLate,
// is no stretch; a late one is, from when it was due to floorSettle past
// the wake, and overlapping ones merge.
func TestStarvationObserve(t *testing.T) {
	s := watchStarvation()
	base := time.Now().Add(time.Hour) // after any stretch the watcher itself may find
	s.observe(base, base.Add(starveTick))
	s.observe(base, base.Add(starveTick+starveLate-time.Millisecond))
	s.observe(base, base.Add(starveTick+200*time.Millisecond))
	s.observe(base.Add(250*time.Millisecond), base.Add(300*time.Millisecond+starveTick))
	var got []time.Duration
	for _, sp := range s.close() {
		if sp.From.Before(base) {
			continue
		}
		got = append(got, sp.From.Sub(base), sp.To.Sub(base))
	}
	require.Equal(t, []time.Duration{starveTick, 300*time.Millisecond + starveTick + floorSettle}, got,
		"the two late wakes' stretches, merged; the wakes on time none")
}
