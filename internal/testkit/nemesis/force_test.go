package nemesis

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

type fixedLease struct {
	owner string
	ttl   time.Duration
}

func (l fixedLease) Owner() string      { return l.owner }
func (l fixedLease) Token() fence.Token { return 1 }
func (l fixedLease) TTL() time.Duration { return l.ttl }

// TestBreakTargets: a break goes to the first key from its planned one on
// that a lease holds now (valid, not released), and names a term of
// office as campaign records it.
func TestBreakTargets(t *testing.T) {
	keys := []string{"a", "b", "c"}
	wl := &workload{p: &Plan{Keys: keys}, res: map[string]*safety.Resource{}}
	for _, k := range keys {
		wl.res[k] = safety.NewResource(k)
	}
	if got := wl.heldKey(1); got != "b" {
		t.Fatalf("no key held: heldKey(1) = %q; want the planned key b", got)
	}
	wl.res["a"].Granted(fixedLease{"x", time.Minute})
	released := fixedLease{"y", time.Minute}
	wl.res["c"].Granted(released)
	wl.res["c"].Released(released)
	wl.res["b"].Granted(fixedLease{"z", 0}) // ended by its holder's clock
	for from, want := range []string{"a", "a", "a"} {
		if got := wl.heldKey(from); got != want {
			t.Errorf("a held, b ended, c released: heldKey(%d) = %q; want %q", from, got, want)
		}
	}
	if got := brokenHolder("0123 w1-2", "w1-2"); got != "term-w1-2" {
		t.Errorf("brokenHolder of a term = %q; want term-w1-2", got)
	}
	if got := brokenHolder("0123", ""); got != "0123" {
		t.Errorf("brokenHolder of a lock = %q; want its owner", got)
	}
}
