package observe

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dlockgo/dlock/fence"
)

// TestRedact covers texts the strategies do not produce today; the real
// errors are checked in log_test.go against a server.
func TestRedact(t *testing.T) {
	owner := "0123456789abcdef0123456789abcdef"
	hexKey := "ffffffffffffffffffff" // a key may be hex too: it is logged as such
	stale := &fence.StaleError{Resource: "k", Token: 7, Highest: 9}
	tests := []struct {
		err  error
		key  string
		want string
	}{
		{errors.New("plain 127.0.0.1:6379 ttl 30s"), "k", "plain 127.0.0.1:6379 ttl 30s"},
		{errors.New("owner " + owner + " refused"), "k", "owner 0123… refused"},
		{errors.New("counter at 1764496123456789, epoch " + owner), "k", "counter at 1764…, epoch 0123…"},
		{fmt.Errorf("lock on %q by %s", hexKey, owner), hexKey, `lock on "` + hexKey + `" by 0123…`},
		{fmt.Errorf("dlock: extend %q: %w", "k", stale), "k", `dlock: extend "k": dlock: stale fencing token for "k"`},
		{errors.New("ends in " + owner), "", "ends in 0123…"},
	}
	for _, tt := range tests {
		if got := redact(tt.err, tt.key); got != tt.want {
			t.Errorf("redact(%q, %q) = %q; want %q", tt.err, tt.key, got, tt.want)
		}
	}
}
