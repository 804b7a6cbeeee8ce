package keyname_test

import (
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/keyname"
)

func TestRWLock(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"doc", "dlock:rw:{doc}"},
		{"a}b", "dlock:rw:{a}b}"},
		{"}", "dlock:rw:%{%7D}"},
		{"}%}", "dlock:rw:%{%7D%25%7D}"},
	} {
		if got := keyname.RWLock(tt.key); got != tt.want {
			t.Errorf("RWLock(%q) = %q; want %q", tt.key, got, tt.want)
		}
	}
	// A read-write lock's keys never fall among another kind's.
	for _, k := range []string{"rw:x", "}rw", "", "{doc}"} {
		for _, other := range []string{keyname.Single(k), keyname.Claims(k)} {
			if strings.HasPrefix(other, "dlock:rw:") {
				t.Errorf("%q starts like a read-write lock's keys", other)
			}
		}
	}
}
