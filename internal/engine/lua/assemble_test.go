package lua

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// defined lists the names src defines at the left margin, in order.
func defined(src string) []string { return Declared(src) }

// TestSourceChunks: a script holds the library's chunks it uses, directly
// or through others, in the library's order and before its own text, and
// no others; a name in a comment or a string, a field, or a variable of
// its own is no use.
func TestSourceChunks(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string
	}{
		{"return 1\n", nil},
		{"return fmt(1)\n", []string{"fmt"}},
		{"local a, bad = draw(nil, 'x')\n", []string{"clock", "now", "us", "draw_at", "draw"}},
		{"local a, bad = draw_at(nil, 'x', 1)\n", []string{"draw_at"}},
		{"return stale(fmt(1))\n", []string{"fmt", "stale"}},
		{"setpx(KEYS[1], 'v', '0')\n", []string{"setpx"}},
		{"stretch(10, KEYS[1], KEYS[2])\n", []string{"stretch"}},
		{"return first_left(KEYS[1])\n", []string{"clock", "now", "us", "first_left"}},
		{"return now\n", []string{"clock", "now", "us"}},
		{"if buried(ARGV[1], nil) then return 0 end\n", []string{"clock", "now", "us", "K", "gone", "buried"}},
		{"bury(ARGV[1], 10, nil)\n", []string{"clock", "now", "us", "K", "fmt", "remember", "bury"}},
		{"return gone(KEYS[2], ARGV[1], 0)\n", []string{"gone"}},
		{"return kept(nil, '0')\n", []string{"clock", "now", "us", "K", "fmt", "keep", "expire", "kept"}},
		{"local p = enqueue(KEYS[1], ARGV[1])\n", []string{"enqueue"}},
		{"local head = 1 -- a variable, not the call: head(\nreturn head\n", nil},
		{"return 'now draw( K'\n", nil},
		{"return x.now, t:draw(1)\n", nil},
		{"local function fmt(n) return n end\nreturn fmt(1)\n", nil},
	} {
		src, err := Source(Spec{FS: fstest.MapFS{"lua/body.lua": {Data: []byte(c.body)}}, Body: []string{"body.lua"}})
		require.NoError(t, err, c.body)
		require.True(t, strings.HasSuffix(src, c.body), "%q: the script's text last", c.body)
		got := defined(strings.TrimSuffix(src, c.body))
		if !slices.Equal(got, c.want) {
			t.Errorf("%q holds %v; want %v", c.body, got, c.want)
		}
	}
}

// TestSourceOrder: the chunks Head uses come before it and the others
// after it, then the body's files in order; a package's Lib comes after
// the engine's library, its functions held only when called; without a
// head or a use the files stand alone.
func TestSourceOrder(t *testing.T) {
	fsys := fstest.MapFS{
		"lua/head.lua": {Data: []byte("-- head: fmt(\nif ARGV[1] then return fmt(1) end\n")},
		"lua/a.lua":    {Data: []byte("local a = enrich(now)\n")},
		"lua/b.lua":    {Data: []byte("return a\n")},
		"lua/lib.lua": {Data: []byte("-- lib: what the package shares.\n\n" +
			"-- enrich(n): n as text.\nlocal function enrich(n)\n  return fmt(n)\nend\n\n" +
			"local function unused() return 1 end\n")},
	}
	src, err := Source(Spec{FS: fsys, Lib: []string{"lib.lua"}, Head: "head.lua", Body: []string{"a.lua", "b.lua"}})
	require.NoError(t, err)
	parts := regexp.MustCompile(`(?m)^(-- head: fmt\(|local a = |return a|local function (\w+)|local now)`).FindAllStringSubmatch(src, -1)
	var got []string
	for _, p := range parts {
		if p[2] != "" {
			got = append(got, p[2])
		} else {
			got = append(got, p[1])
		}
	}
	want := []string{"fmt", "-- head: fmt(", "clock", "local now", "enrich", "local a = ", "return a"}
	if !slices.Equal(got, want) {
		t.Errorf("parts in order %q; want %q\n%s", got, want, src)
	}
	if !strings.Contains(src, "-- enrich(n): n as text.\n") || strings.Contains(src, "-- lib: what") {
		t.Errorf("a chunk's comment comes with it, a file's commentary does not:\n%s", src)
	}
	src, err = Source(Spec{FS: fsys, Body: []string{"b.lua", "b.lua"}})
	require.NoError(t, err)
	if want := "return a\nreturn a\n"; src != want {
		t.Errorf("files alone: %q; want %q", src, want)
	}
	if _, err := Source(Spec{Name: "x/missing", FS: fsys, Body: []string{"c.lua"}}); err == nil || !strings.Contains(err.Error(), "x/missing") {
		t.Errorf("a missing file: err = %v; want one naming the script", err)
	}
}

// TestSourceRefuses: a script is not built when its head uses the clock
// read after it, when its own files declare the name of a chunk it holds,
// or when a Lib file holds a statement, redefines a name, or calls a
// function defined after the caller.
func TestSourceRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		spec Spec
		want string
	}{
		{"head uses now", fstest.MapFS{"lua/h.lua": {Data: []byte("if now then return 1 end\n")}},
			Spec{Head: "h.lua"}, "comes after it"},
		{"head uses draw", fstest.MapFS{"lua/h.lua": {Data: []byte("return draw(nil, 'x')\n")}},
			Spec{Head: "h.lua"}, "comes after it"},
		{"own now beside draw", fstest.MapFS{"lua/b.lua": {Data: []byte("local now = 1\nreturn draw(nil, 'x')\n")}},
			Spec{Body: []string{"b.lua"}}, "declares now"},
		{"statement in lib", fstest.MapFS{"lua/l.lua": {Data: []byte("local function f() return 1 end\nreturn f()\n")}},
			Spec{Lib: []string{"l.lua"}}, "only local functions"},
		{"lib redefines", fstest.MapFS{"lua/l.lua": {Data: []byte("local function fmt(n) return n end\n")}},
			Spec{Lib: []string{"l.lua"}}, "defines fmt"},
		{"lib order", fstest.MapFS{"lua/l.lua": {Data: []byte("local function f() return g() end\n\nlocal function g() return 1 end\n")}},
			Spec{Lib: []string{"l.lua"}}, "uses g before its definition"},
	} {
		s := c.spec
		s.Name, s.FS = "x/"+c.name, c.fsys
		if _, err := Source(s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want one saying %q", c.name, err, c.want)
		}
	}
}

// TestCode: comments and strings are blanked, line breaks kept, code
// left as it is.
func TestCode(t *testing.T) {
	for in, want := range map[string]string{
		"a = 1 -- b\nc":           "a = 1     \nc",
		"x('now', \"K\") -- y":    "x(     ,    )     ",
		"x = [[a\nb]] .. 'c\\'d'": "x =    \n    ..       ",
		"--[==[ a\n]] ]==] b":     "        \n        b",
		"s = 'a--b' f()":          "s =        f()",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q; want %q", in, got, want)
		}
	}
}
