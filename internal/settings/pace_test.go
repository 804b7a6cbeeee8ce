package settings_test

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
)

func TestRetryDelay(t *testing.T) {
	r := settings.Pace{Min: 4 * time.Millisecond, Max: 100 * time.Millisecond}
	for n := range 40 {
		b := min(r.Max, r.Min<<min(n, 30))
		for range 50 {
			if d := r.Delay(n); d < b/2 || d > b {
				t.Fatalf("Delay(%d) = %v; want in [%v, %v]", n, d, b/2, b)
			}
		}
	}
}
