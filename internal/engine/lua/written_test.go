package lua_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/engine/lua"
)

// libDir is where the engine's library lives, from the module's root.
const libDir = "internal/engine/lua/"

// alternatives are the functions that more than one file defines on
// purpose, each with the files that do: variants of one step, of which a
// script holds exactly one (the quorum's lost-data guard and its two
// reply shapes, each with or without a token; a release's passing on of
// the lock it frees, published or handed to the queue's head).
var alternatives = map[string][]string{
	"vote_epoch": {"quorum/lua/epoch_check.lua", "quorum/lua/epoch_off.lua", "quorum/lua/epoch_trust.lua"},
	"reply":      {"quorum/lua/reply.lua", "quorum/lua/reply_token.lua"},
	"set_reply":  {"quorum/lua/reply_set.lua", "quorum/lua/reply_set_token.lua"},
	"pass":       {"quorum/lua/hand.lua", "quorum/lua/pass.lua"},
}

// TestLuaWrittenOnce: the module's Lua (every file in a lua/ folder)
// defines each function once: no function is defined by two files but
// the alternatives above, no package file declares a name of the
// engine's library (its scripts would hold two), and every script as
// assembled defines each function it calls, once, before its first call,
// and each of the library's values before its first use (the library's
// chunks come out in the order of their dependencies).
func TestLuaWrittenOnce(t *testing.T) {
	files := luaFiles(t, filepath.Join("..", "..", ".."))
	if len(files) == 0 || files[libDir+"clock.lua"] == "" {
		t.Fatalf("read %d Lua files, not the library's clock.lua: not run from internal/engine/lua?", len(files))
	}
	lib, err := lua.Names()
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	errs = append(errs, writtenTwice(files, alternatives)...)
	errs = append(errs, shadowing(files, lib)...)
	values := libValues(files)
	scripts := lua.Scripts("")
	if len(scripts) == 0 {
		t.Fatal("no script registered")
	}
	for _, s := range scripts {
		errs = append(errs, outOfOrder(s.Name, s.Script.Source(), values)...)
		if first := s.Script.First(); first != nil {
			errs = append(errs, outOfOrder(s.Name+" (first)", first.Source(), values)...)
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// TestLuaWrittenOnceCatches plants each fault TestLuaWrittenOnce looks
// for and wants it reported, and nothing in the sound files beside.
func TestLuaWrittenOnceCatches(t *testing.T) {
	sound := map[string]string{
		libDir + "num.lua":  "local function fmt(n) return n end\n",
		libDir + "key.lua":  "local K = KEYS[1]\n",
		"a/lua/state.lua":   "local function hold(ms) return ms end\n",
		"b/lua/reply.lua":   "local function reply(x) return x end\n",
		"b/lua/reply_t.lua": "local function reply(x) return x end\n",
	}
	alts := map[string][]string{"reply": {"b/lua/reply.lua", "b/lua/reply_t.lua"}}
	lib := []string{"fmt", "K"}
	if errs := append(writtenTwice(sound, alts), shadowing(sound, lib)...); len(errs) > 0 {
		t.Fatalf("sound files reported: %q", errs)
	}
	planted := func(path, text string) map[string]string {
		m := maps(sound)
		m[path] = text
		return m
	}
	for _, c := range []struct {
		name string
		errs []string
		want string
	}{
		{"a function in two packages", writtenTwice(planted("c/lua/state.lua", "x = 1\n  local function hold(ms) return 0 end\n"), alts), "hold: defined in a/lua/state.lua, c/lua/state.lua"},
		{"a third alternative", writtenTwice(planted("b/lua/reply_u.lua", "local function reply(x) return x end\n"), alts), "reply: defined in"},
		{"a library function again", shadowing(planted("c/lua/body.lua", "local function fmt(n) return 0 end\n"), lib), "c/lua/body.lua declares fmt"},
		{"a library value again", shadowing(planted("c/lua/body.lua", "local K, P = KEYS[2], 1\n"), lib), "c/lua/body.lua declares K"},
		{"a call before the definition", outOfOrder("x/a", "local a = f()\nlocal function f() return 1 end\n", nil), "calls f at line 1, before its definition at line 2"},
		{"a call of nothing defined", outOfOrder("x/b", "local function f() return g(1) end\nreturn f()\n", nil), "calls g, which it does not define"},
		{"a function defined twice", outOfOrder("x/c", "local function f() end\nlocal function f() end\nreturn f()\n", nil), "defines f twice"},
		{"a value before its definition", outOfOrder("x/d", "local function f() return now end\nlocal now = 1\nreturn f()\n", []string{"now"}), "uses now at line 1, before its definition at line 2"},
	} {
		if !slices.ContainsFunc(c.errs, func(e string) bool { return strings.Contains(e, c.want) }) {
			t.Errorf("%s: reported %q; want one saying %q", c.name, c.errs, c.want)
		}
	}
	if errs := outOfOrder("x/e", "-- f() in a comment, 'g()' in a string\nlocal function f(n) return tonumber(n) + x.g(1) + y:h() end\nreturn f('1')\n", []string{"now"}); len(errs) > 0 {
		t.Errorf("a sound script reported: %q", errs)
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// luaFiles reads every .lua file in a folder named lua below root, by its
// path from root with slashes; bench/ (a module of its own), testdata
// and hidden folders aside.
func luaFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) != ".lua" || filepath.Base(filepath.Dir(p)) != "lua" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// functionDef is a function's definition at any depth; its name is
	// the first group.
	functionDef = regexp.MustCompile(`^\s*(?:local\s+)?function\s+(\w+)\s*\(`)
	// valueDef is a declaration of local values at the left margin.
	valueDef = regexp.MustCompile(`^local\s+([\w\s,]+?)\s*(?:=|$)`)
	// call is a call of a name (not of a field or a method).
	call = regexp.MustCompile(`(?:^|[^\w.:])(\w+)\s*\(`)
)

// notCalls are the words before a parenthesis that call no function of
// the scripts: Lua's keywords and the globals the scripts may call.
var notCalls = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`and break do else elseif end false for function goto if in local nil not or repeat return then true until while
		assert error ipairs next pairs pcall xpcall rawequal rawget rawlen rawset select setmetatable getmetatable tonumber tostring type unpack`) {
		notCalls[w] = true
	}
}

// writtenTwice reports each function that more than one file defines,
// unless alts lists exactly those files for it.
func writtenTwice(files map[string]string, alts map[string][]string) []string {
	where := map[string][]string{}
	for path, text := range files {
		seen := map[string]bool{}
		for l := range strings.SplitSeq(lua.Code(text), "\n") {
			if m := functionDef.FindStringSubmatch(l); m != nil && !seen[m[1]] {
				seen[m[1]] = true
				where[m[1]] = append(where[m[1]], path)
			}
		}
	}
	var errs []string
	for name, paths := range where {
		sort.Strings(paths)
		if len(paths) < 2 {
			continue
		}
		if want := slices.Sorted(slices.Values(alts[name])); slices.Equal(paths, want) {
			continue
		}
		errs = append(errs, fmt.Sprintf("%s: defined in %s; a function is written once (or listed in alternatives, with every file that defines it)", name, strings.Join(paths, ", ")))
	}
	sort.Strings(errs)
	return errs
}

// shadowing reports each package file (outside the library) that
// declares, at the left margin, or defines as a function at any depth, a
// name in lib.
func shadowing(files map[string]string, lib []string) []string {
	var errs []string
	for path, text := range files {
		if strings.HasPrefix(path, libDir) {
			continue
		}
		names := lua.Declared(text)
		for l := range strings.SplitSeq(lua.Code(text), "\n") {
			if m := functionDef.FindStringSubmatch(l); m != nil {
				names = append(names, m[1])
			}
		}
		for _, n := range names {
			if slices.Contains(lib, n) {
				errs = append(errs, fmt.Sprintf("%s declares %s, a name of the engine's library (%s)", path, n, libDir))
			}
		}
	}
	sort.Strings(errs)
	return slices.Compact(errs)
}

// libValues returns the values the library's files declare (the clock's
// now and us, K), as against its functions.
func libValues(files map[string]string) []string {
	var out []string
	for path, text := range files {
		if !strings.HasPrefix(path, libDir) {
			continue
		}
		for l := range strings.SplitSeq(lua.Code(text), "\n") {
			if m := valueDef.FindStringSubmatch(l); m != nil && !strings.HasPrefix(strings.TrimSpace(m[1]), "function") {
				for n := range strings.SplitSeq(m[1], ",") {
					out = append(out, strings.TrimSpace(n))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// outOfOrder reports, for the script name of text src: a function it
// defines twice, a call of a function it does not define or defines only
// after the call, and a use of one of values (declared at the left
// margin) before its declaration.
func outOfOrder(name, src string, values []string) []string {
	lines := strings.Split(lua.Code(src), "\n")
	defs := map[string]int{}
	var errs []string
	for i, l := range lines {
		if m := functionDef.FindStringSubmatch(l); m != nil {
			if _, ok := defs[m[1]]; ok {
				errs = append(errs, fmt.Sprintf("%s: defines %s twice (lines %d and %d)", name, m[1], defs[m[1]]+1, i+1))
				continue
			}
			defs[m[1]] = i
		} else if m := valueDef.FindStringSubmatch(l); m != nil {
			for n := range strings.SplitSeq(m[1], ",") {
				if n = strings.TrimSpace(n); slices.Contains(values, n) {
					if _, ok := defs[n]; !ok {
						defs[n] = i
					}
				}
			}
		}
	}
	for i, l := range lines {
		for _, m := range call.FindAllStringSubmatch(l, -1) {
			n := m[1]
			if notCalls[n] {
				continue
			}
			at, ok := defs[n]
			switch {
			case !ok:
				errs = append(errs, fmt.Sprintf("%s: calls %s, which it does not define (line %d)", name, n, i+1))
			case at > i:
				errs = append(errs, fmt.Sprintf("%s: calls %s at line %d, before its definition at line %d", name, n, i+1, at+1))
			}
		}
		for _, v := range values {
			at, ok := defs[v]
			if !ok || at <= i {
				continue
			}
			if regexp.MustCompile(`(?:^|[^\w.:])` + v + `\b`).MatchString(l) {
				errs = append(errs, fmt.Sprintf("%s: uses %s at line %d, before its definition at line %d", name, v, i+1, at+1))
			}
		}
	}
	return errs
}
