package argerr

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestErrorValue(t *testing.T) {
	for _, tc := range []struct {
		value any
		want  string
	}{
		{time.Second, "dlock: invalid ttl 1s: must be positive"},
		{-1500 * time.Millisecond, "dlock: invalid ttl -1.5s: must be positive"},
		{"1s", `dlock: invalid ttl "1s": must be positive`},
		{3, "dlock: invalid ttl 3: must be positive"},
		{[]string{"a:1"}, `dlock: invalid ttl []string{"a:1"}: must be positive`},
		{nil, "dlock: invalid ttl <nil>: must be positive"},
	} {
		e := &Error{Arg: "ttl", Value: tc.value, Rule: "must be positive"}
		if got := e.Error(); got != tc.want {
			t.Errorf("Error() = %q; want %q", got, tc.want)
		}
	}
}
