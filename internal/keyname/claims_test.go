package keyname_test

import (
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/keyname"
)

func TestClaims(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"jobs", "dlock:claims:{jobs}"},
		{"a}b", "dlock:claims:{a}b}"},
		{"}", "dlock:claims:%{%7D}"},
		{"}%}", "dlock:claims:%{%7D%25%7D}"},
	} {
		if got := keyname.Claims(tt.name); got != tt.want {
			t.Errorf("Claims(%q) = %q; want %q", tt.name, got, tt.want)
		}
	}
	// A queue's keys never fall among a single lock's: a lock's hash is
	// dlock:{KEY} or dlock:%{KEY}, whose sixth byte is '{' or '%'.
	for _, k := range []string{"claims:x", "}claims", "", "{jobs}"} {
		if strings.HasPrefix(keyname.Single(k), "dlock:claims:") {
			t.Errorf("Single(%q) = %q starts like a queue's keys", k, keyname.Single(k))
		}
	}
}
