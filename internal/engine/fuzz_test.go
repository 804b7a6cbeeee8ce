package engine_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/node"
)

// FuzzStaleCounter reads any error reply as a DLSTALE refusal or not: it
// is one exactly when it starts "DLSTALE ", and its counter is the
// decimal after that, or 0 when there is none to read.
func FuzzStaleCounter(f *testing.F) {
	for _, s := range []string{"DLSTALE 42", "DLSTALE ", "DLSTALE", "DLSTALE x", "DLSTALE 18446744073709551616",
		"DLSTALE -1", "DLSTALE 7 more", "NOSCRIPT No matching script", "dlstale 5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		h, ok := engine.StaleCounter(&node.ReplyError{Msg: msg})
		rest, stale := strings.CutPrefix(msg, "DLSTALE ")
		if ok != stale {
			t.Fatalf("StaleCounter(%q) = %v; want %v", msg, ok, stale)
		}
		want, err := strconv.ParseUint(rest, 10, 64)
		if !stale || err != nil {
			want = 0
		}
		if uint64(h) != want {
			t.Fatalf("StaleCounter(%q) = %d; want %d", msg, h, want)
		}
		if _, ok := engine.StaleCounter(fmt.Errorf("wrapped: %w", &node.ReplyError{Msg: msg})); ok != stale {
			t.Fatalf("StaleCounter(wrapped %q) = %v; want %v", msg, ok, stale)
		}
	})
}
