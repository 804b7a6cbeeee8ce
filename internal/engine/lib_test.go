package engine_test

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/engine/lua"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/node"
)

// run evaluates body with the library's chunks it uses, as lua.Script
// builds it from a primitive's lua/, on KEYS {key}.
func run(t *testing.T, n node.Node, body, key string, args ...string) (node.Reply, error) {
	t.Helper()
	fsys := fstest.MapFS{"lua/body.lua": {Data: []byte(body)}}
	src, err := lua.Source(lua.Spec{FS: fsys, Body: []string{"body.lua"}})
	require.NoError(t, err)
	return n.Eval(t.Context(), node.NewScript(src), []string{key}, args...)
}

// TestDraw: a token is the counter plus one, or the server's clock in µs
// when that is larger; a counter within 2^20 of 2^53 is refused with
// DLTOKEN naming it.
func TestDraw(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	const body = `local a, bad = draw(ARGV[1], 'attempts') if not a then return bad end return fmt(a)`
	before := uint64(time.Now().Add(-time.Second).UnixMicro())
	r, err := run(t, n, body, "k", "0")
	require.NoError(t, err)
	tok, err := strconv.ParseUint(r.Str(0), 10, 64)
	require.NoError(t, err)
	if tok < before || tok > uint64(time.Now().Add(time.Second).UnixMicro()) {
		t.Errorf("draw from 0 = %d; want the server's clock in µs (about %d)", tok, before)
	}
	ahead := strconv.FormatUint(tok+5_000_000_000, 10) // a counter far ahead of the clock
	r, err = run(t, n, body, "k", ahead)
	require.NoError(t, err)
	if want := strconv.FormatUint(tok+5_000_000_001, 10); r.Str(0) != want {
		t.Errorf("draw from %s = %s; want %s", ahead, r.Str(0), want)
	}
	for _, c := range []struct {
		counter string
		refused bool
	}{
		{"9007199253692415", false}, // 2^53 - 2^20 - 1
		{"9007199253692416", true},  // 2^53 - 2^20
		{"9007199254740993", true},  // past 2^53
	} {
		_, err := run(t, n, body, "k", c.counter)
		if got := err != nil && strings.Contains(err.Error(), "DLTOKEN attempts "+c.counter); got != c.refused {
			t.Errorf("draw from %s: %v; want refused %v", c.counter, err, c.refused)
		}
	}
}

// TestBury: a buried owner is refused until its record lapses, on a hash
// that did not exist (which then lives as long as the record) and on one
// that did; once it lapsed, the hash's gone field goes.
func TestBury(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	const bury = `bury(ARGV[1], tonumber(ARGV[2]), redis.call('HGET', K, 'gone')) return 1`
	const buried = `if buried(ARGV[1], redis.call('HGET', K, 'gone')) then return 1 end return 0`
	_, err := srv.Do("HSET", "old", "attempts", "7")
	require.NoError(t, err)
	_, err = srv.Do("PEXPIRE", "old", "100") // due before the record's end
	require.NoError(t, err)
	for _, key := range []string{"new", "old"} {
		_, err := run(t, n, bury, key, "o1", "400")
		require.NoError(t, err)
		for owner, want := range map[string]int64{"o1": 1, "o2": 0} {
			r, err := run(t, n, buried, key, owner)
			require.NoError(t, err)
			if r.Int(0) != want {
				t.Errorf("%s: buried(%s) = %d; want %d", key, owner, r.Int(0), want)
			}
		}
		pttl, err := srv.Do("PTTL", key)
		require.NoError(t, err)
		if ms, _ := strconv.Atoi(pttl); ms < 300 || ms > 400 {
			t.Errorf("%s: PTTL %s ms after a bury of 400 ms; want the record's life", key, pttl)
		}
	}
	_, err = srv.Do("PERSIST", "old")
	require.NoError(t, err)
	time.Sleep(450 * time.Millisecond)
	r, err := run(t, n, buried, "old", "o1")
	require.NoError(t, err)
	if r.Int(0) != 0 {
		t.Errorf("buried after the record lapsed = %d; want 0", r.Int(0))
	}
	if g, _ := srv.Do("HGET", "old", "gone"); g != "" {
		t.Errorf("gone field %q after the record lapsed; want it removed", g)
	}
}

// TestKept: the hash's expiry moves only when it falls short of the life
// asked for, and then to one and a half times it; '0' keeps it for ever.
func TestKept(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, redistest.Clients[0], srv.Addr())
	const kept = `redis.call('HSET', K, 'attempts', '1') return kept(redis.call('HGET', K, 'exp'), ARGV[1]) or ''`
	pttl := func() int {
		p, err := srv.Do("PTTL", "h")
		require.NoError(t, err)
		ms, _ := strconv.Atoi(p)
		return ms
	}
	_, err := run(t, n, kept, "h", "10000")
	require.NoError(t, err)
	if p := pttl(); p < 14000 || p > 15000 {
		t.Errorf("PTTL %d ms after kept(10000) on a new hash; want 15000", p)
	}
	_, err = run(t, n, kept, "h", "5000")
	require.NoError(t, err)
	if p := pttl(); p < 14000 {
		t.Errorf("PTTL %d ms after kept(5000); want the expiry kept where it was, later", p)
	}
	r, err := run(t, n, kept, "h", "0")
	require.NoError(t, err)
	if r.Str(0) != "inf" || pttl() != -1 {
		t.Errorf("kept(0) = %q, PTTL %d; want inf and no expiry", r.Str(0), pttl())
	}
}
