package redistest

import (
	"context"
	"errors"
	"testing"
)

// TestSettled: Settled wants settledCalls answers in a row; a failure
// starts the count again, as a connection broken by a fault would.
func TestSettled(t *testing.T) {
	calls := 0
	Settled(t, func(context.Context) error {
		calls++
		if calls == 3 || calls == 10 {
			return errors.New("EOF")
		}
		return nil
	})
	if want := 10 + settledCalls; calls != want {
		t.Fatalf("Settled made %d calls; want %d (a failure at the 3rd and 10th, then %d in a row)", calls, want, settledCalls)
	}
}
