package lease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/lease"
)

type nopBackend struct{}

func (nopBackend) Extend(context.Context, *lease.Lease, time.Duration) (time.Time, error) {
	return time.Now().Add(time.Second), nil
}
func (nopBackend) Release(context.Context, *lease.Lease) error { return nil }

// TestKeys: a lease on one key reports that key and its token; a lease on
// several reports each key's own token, in the order asked for, Key and
// Token being the first's, and a copy the caller may change.
func TestKeys(t *testing.T) {
	one := engine.NewLease(nopBackend{}, leasing.Grant{Key: "a", Token: 7, TTL: time.Second, Until: time.Now().Add(time.Second)})
	if got := one.Keys(); !slices.Equal(got, []lease.Held{{Key: "a", Token: 7}}) {
		t.Errorf("Keys of a one-key lease: %v", got)
	}
	if tok, ok := one.TokenOf("a"); tok != 7 || !ok {
		t.Errorf("TokenOf(a): %d, %v; want 7, true", tok, ok)
	}
	if tok, ok := one.TokenOf("b"); ok {
		t.Errorf("TokenOf(b) of a lease on a: %d, true; want false", tok)
	}
	set := []lease.Held{{Key: "x", Token: 3}, {Key: "y", Token: 9}}
	granted := []leasing.Held{{Key: "x", Token: 3}, {Key: "y", Token: 9}}
	many := engine.NewLease(nopBackend{}, leasing.Grant{Key: "x", Token: 3, Set: granted, TTL: time.Second, Until: time.Now().Add(time.Second)})
	got := many.Keys()
	if !slices.Equal(got, set) || many.Key() != "x" || many.Token() != 3 {
		t.Errorf("a lease on x, y: Keys %v, Key %q, Token %d", got, many.Key(), many.Token())
	}
	got[0].Token = 100
	for _, h := range set {
		if tok, ok := many.TokenOf(h.Key); tok != h.Token || !ok {
			t.Errorf("TokenOf(%s): %d, %v; want %d, true", h.Key, tok, ok, h.Token)
		}
	}
	if tok, ok := many.TokenOf("z"); ok || tok != fence.Token(0) {
		t.Errorf("TokenOf(z): %d, %v; want 0, false", tok, ok)
	}
}
