package otelmetric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/observe/otelmetric"
)

// TestObserveAllocs feeds events straight to the observer: a server adds
// allocations of its own that would hide the observer's.
func TestObserveAllocs(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(t.Context())
	obs, err := otelmetric.New(mp)
	require.NoError(t, err)
	events := []observe.Event{
		{Kind: observe.AcquireStarted, Strategy: "quorum", Key: "k"},
		{Kind: observe.Vote, Strategy: "quorum", Key: "k", Node: "127.0.0.1:6379", Outcome: "ok", Wait: time.Millisecond},
		{Kind: observe.AcquireEnded, Strategy: "quorum", Key: "k", Wait: time.Millisecond},
		{Kind: observe.Renewed, Strategy: "quorum", Key: "k"},
		{Kind: observe.Released, Strategy: "quorum", Key: "k"},
		{Kind: observe.ForceReleased, Strategy: "quorum", Key: "k"},
		{Kind: observe.RateDecided, Strategy: "ratelimit", Key: "k", Outcome: "refused", Wait: time.Millisecond},
		{Kind: observe.AcquireEnded, Strategy: "quorum", Key: "k", Err: lease.ErrTaken},
	}
	for _, e := range events { // the first vote builds its attribute set
		obs.Observe(e)
	}
	for _, e := range events {
		if n := testing.AllocsPerRun(100, func() { obs.Observe(e) }); n > 0 {
			t.Errorf("Observe(%v) allocates %v times; want 0", e.Kind, n)
		}
	}
}
