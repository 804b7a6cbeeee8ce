package engine

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestSourceParts: a script gets gone.lua and queue.lua only when it calls
// what they define, each after the core and before the script's own text.
func TestSourceParts(t *testing.T) {
	for _, c := range []struct {
		body        string
		gone, queue bool
	}{
		{"return draw(nil, 'x')\n", false, false},
		{"if buried(ARGV[1], nil) then return 0 end\n", true, false},
		{"local p = enqueue(K .. ':q', ARGV[1])\n", false, true},
		{"bury(ARGV[1], 10, nil)\nlocal h = head(K .. ':q', K .. ':qx', ARGV[1])\n", true, true},
		{"local head = 1 -- a variable, not the call\n", false, false},
	} {
		src, err := Source(Spec{FS: fstest.MapFS{"lua/body.lua": {Data: []byte(c.body)}}, Prelude: true, Body: []string{"body.lua"}})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(src, coreLua), "%q: the core first", c.body)
		require.True(t, strings.HasSuffix(src, c.body), "%q: the script's text last", c.body)
		if got := strings.Contains(src, "local function bury("); got != c.gone {
			t.Errorf("%q: gone.lua included %v, want %v", c.body, got, c.gone)
		}
		if got := strings.Contains(src, "local function enqueue("); got != c.queue {
			t.Errorf("%q: queue.lua included %v, want %v", c.body, got, c.queue)
		}
	}
}

// TestSourceOrder: Head comes before the prelude, and the prelude's parts
// are chosen by Body alone; without Prelude the files stand alone, in
// order; a missing file is an error naming the script.
func TestSourceOrder(t *testing.T) {
	fsys := fstest.MapFS{
		"lua/head.lua": {Data: []byte("-- head: bury(\n")},
		"lua/a.lua":    {Data: []byte("local a = 1\n")},
		"lua/b.lua":    {Data: []byte("return a\n")},
	}
	src, err := Source(Spec{FS: fsys, Head: "head.lua", Prelude: true, Body: []string{"a.lua", "b.lua"}})
	require.NoError(t, err)
	if want := "-- head: bury(\n" + coreLua + "local a = 1\nreturn a\n"; src != want {
		t.Errorf("with a head:\n%s\nwant the head, the core alone, then the body", src)
	}
	src, err = Source(Spec{FS: fsys, Body: []string{"b.lua", "a.lua"}})
	require.NoError(t, err)
	if want := "return a\nlocal a = 1\n"; src != want {
		t.Errorf("without the prelude: %q; want %q", src, want)
	}
	if _, err := Source(Spec{Name: "x/missing", FS: fsys, Body: []string{"c.lua"}}); err == nil || !strings.Contains(err.Error(), "x/missing") {
		t.Errorf("a missing file: err = %v; want one naming the script", err)
	}
}
