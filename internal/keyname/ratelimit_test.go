package keyname_test

import (
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/keyname"
)

func TestRate(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"api", "dlock:rate:{api}"},
		{"a}b", "dlock:rate:{a}b}"},
		{"}", "dlock:rate:%{%7D}"},
	} {
		if got := keyname.Rate(tt.key); got != tt.want {
			t.Errorf("Rate(%q) = %q; want %q", tt.key, got, tt.want)
		}
	}
	for _, k := range []string{"rate:x", "}rate", "", "{api}"} {
		if strings.HasPrefix(keyname.Single(k), "dlock:rate:") || strings.HasPrefix(keyname.Claims(k), "dlock:rate:") {
			t.Errorf("a lock's or a queue's key for %q starts like a rate limit's", k)
		}
	}
}
