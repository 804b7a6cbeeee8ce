package keyname_test

import (
	"testing"

	"github.com/dlockgo/dlock/internal/keyname"
)

func TestSingle(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"a", "dlock:{a}"},
		{"a}b", "dlock:{a}b}"},
		{"{x}", "dlock:{{x}}"},
		{"}", "dlock:%{%7D}"},
		{"}%}", "dlock:%{%7D%25%7D}"},
		{"%7D", "dlock:{%7D}"},
	} {
		if got := keyname.Single(tt.key); got != tt.want {
			t.Errorf("Single(%q) = %q; want %q", tt.key, got, tt.want)
		}
	}
	// Distinct keys, distinct names, and the escaped ones never collide
	// with a plain one.
	seen := map[string]string{}
	for _, k := range []string{"}", "%7D", "%}", "}%", "}}", "%7D%7D", "dlock:%{%7D}", "a", "}a"} {
		n := keyname.Single(k)
		if other, ok := seen[n]; ok {
			t.Errorf("keys %q and %q share the name %q", other, k, n)
		}
		seen[n] = k
	}
}
