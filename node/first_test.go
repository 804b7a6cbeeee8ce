package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

// checkFirst runs once per server process before checkedFast: it counts
// its runs in KEYS[1] and refuses when ARGV[1] is "refuse".
var (
	checkFirst = node.NewScript(`
if ARGV[1] == 'refuse' then return redis.error_reply('DLTEST refused') end
redis.call('INCR', KEYS[1])
return 'first'`)
	checkedFast = node.NewScriptAfter(checkFirst, `return 'fast'`)
)

// TestScriptAfter: a script made with NewScriptAfter runs on a server only
// after its first script has run there, successfully, since the server
// started or flushed its scripts, through Eval and Pipeline alike.
func TestScriptAfter(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range redistest.AllNodes(t, srv.Addr()) {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			key := "first-runs-" + c.Name
			eval := func(arg string) (string, error) {
				r, err := c.Node.Eval(ctx, checkedFast, []string{key}, arg)
				return r.Str(0), err
			}
			pipeline := func(arg string) (string, error) {
				res, _, err := c.Node.Pipeline(ctx, []node.Call{{Script: checkedFast, Keys: []string{key}, Args: []string{arg}}}, node.Wait{})
				if err != nil {
					return "", err
				}
				return res[0].Reply.Str(0), res[0].Err
			}
			expect := func(step string, run func(string) (string, error), arg, want string, refused bool) {
				t.Helper()
				got, err := run(arg)
				if refused {
					if err == nil {
						t.Fatalf("%s: %q, nil; want the first script's refusal", step, got)
					}
					return
				}
				if err != nil || got != want {
					t.Fatalf("%s: %q, %v; want %q", step, got, err, want)
				}
			}
			flush := func() {
				_, err := srv.Do("SCRIPT", "FLUSH")
				require.NoError(t, err)
			}
			flush()
			expect("first call", eval, "", "first", false)
			expect("second call", eval, "", "fast", false)
			expect("third call", pipeline, "", "fast", false)

			flush()
			expect("first call after a refusal", eval, "refuse", "", true)
			expect("call after a refused first", eval, "", "first", false)
			expect("call after that", eval, "", "fast", false)

			flush()
			expect("pipelined after a flush", pipeline, "", "first", false)
			expect("pipelined after that", pipeline, "", "fast", false)
			if runs, _ := srv.Do("GET", key); runs != "3" {
				t.Fatalf("the first script ran %s times; want 3", runs)
			}
		})
	}
	// A restart empties the cache as a flush does.
	srv.Restart()
	for _, c := range redistest.AllNodes(t, srv.Addr()) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := c.Node.Eval(ctx, checkedFast, []string{"after-restart"}, "")
		cancel()
		if err != nil || got.Str(0) != "first" && got.Str(0) != "fast" {
			t.Fatalf("%s after a restart: %v, %v", c.Name, got, err)
		}
	}
	if runs, _ := srv.Do("GET", "after-restart"); runs != "1" {
		t.Fatalf("the first script ran %s times on the restarted server; want 1 (once, for every client)", runs)
	}
}
