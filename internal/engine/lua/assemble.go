// Package lua is the one Lua library of dlock's scripts (the .lua files
// beside this one: the server's clock read once, tokens, the idle expiry
// of a key's hash, gone owners and the ticket queue) and the one way to
// assemble a script from it: each function in the scripts that call it,
// and only there (Spec, Source, Script). It also keeps the registry of
// every script the packages run, by a name that says which package's
// data model it acts on ("single/claim", "quorum/vote+token+check"), so
// that one list holds them all for the tests that judge them together:
// their text (TestScriptsGolden), the Lua written once
// (TestLuaWrittenOnce), the ACL lines, the scripts a test preloads.
//
// It imports node alone, so that every package, fence's store and the
// engine among them, can build its scripts with it.
package lua

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/node"
)

// The library, in the order its chunks come out in a script, which is
// the order of their dependencies: a chunk uses only those before it.
var (
	//go:embed *.lua
	libFS embed.FS

	libFiles = []string{"clock.lua", "key.lua", "num.lua", "token.lua", "keep.lua", "gone.lua", "queue.lua"}
)

// Spec is one script: files of a package's embedded lua/, and the chunks
// of the engine's library (internal/engine/lua) and of the package's own
// (Lib) that they use.
type Spec struct {
	// Name is the registry's key: the package, then the transition, then
	// any variant ("single/claim", "quorum/vote+token+check").
	Name string
	// FS holds the package's files, read as "lua/" + each name.
	FS fs.FS
	// Lib is the package's own chunk files, after the engine's library:
	// their functions come into a script as the library's do, when it
	// calls them.
	Lib []string
	// Head, when set, is a file run first, before the library's values
	// (the clock, K): it may answer without them (single's fast_*.lua),
	// and may call only the chunks that use neither.
	Head string
	// Body is the package's files, in order.
	Body []string
	// After, when set, is the script a server must have run before this
	// one (node.NewScriptAfter).
	After *node.Script
}

// A chunk is one top-level definition of a chunk file, with the comment
// above it: a local function, or a value of the library (the clock's now
// and us, K). A script holds a chunk only when it uses it, directly or
// through another chunk: each function a script defines costs the server
// a closure at every run of it, and the commands of a chunk left out are
// not the script's (the ACL lines grant what the scripts call).
type chunk struct {
	file  string // where it is defined, for errors
	names []string
	value bool
	text  string
	code  string // text without comments and strings, where uses are looked for
	deps  []int  // the earlier chunks it uses, by index
}

// usedIn reports whether code, as its names read, uses c: calls it, for a
// function; mentions it, for a value.
func (c *chunk) usedIn(n names) bool {
	set := n.calls
	if c.value {
		set = n.mentions
	}
	for _, name := range c.names {
		if set[name] {
			return true
		}
	}
	return false
}

// names are the identifiers of some code, a field (x.name, x:name) left
// out: those it mentions, and those of them it calls.
type names struct{ calls, mentions map[string]bool }

// namesOf reads code (as Code returns it) once: a use of a function is
// its name followed by a parenthesis, space between allowed; of a value,
// any mention.
func namesOf(code string) names {
	n := names{calls: map[string]bool{}, mentions: map[string]bool{}}
	word := func(b byte) bool {
		return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
	}
	for i := 0; i < len(code); {
		if !word(code[i]) {
			i++
			continue
		}
		j := i
		for j < len(code) && word(code[j]) {
			j++
		}
		if i == 0 || code[i-1] != '.' && code[i-1] != ':' {
			id := code[i:j]
			n.mentions[id] = true
			k := j
			for k < len(code) && (code[k] == ' ' || code[k] == '\t' || code[k] == '\n' || code[k] == '\r' || code[k] == '\f' || code[k] == '\v') {
				k++
			}
			if k < len(code) && code[k] == '(' {
				n.calls[id] = true
			}
		}
		i = j
	}
	return n
}

// A library is chunks in the order they come out.
type library []chunk

var (
	engineLib     library
	engineLibErr  error
	engineLibOnce sync.Once
)

// lib returns the engine's library, parsed once.
func lib() (library, error) {
	engineLibOnce.Do(func() {
		var files []namedText
		for _, f := range libFiles {
			b, err := fs.ReadFile(libFS, f)
			if err != nil {
				engineLibErr = fmt.Errorf("lua: %w", err)
				return
			}
			files = append(files, namedText{"internal/engine/lua/" + f, string(b)})
		}
		engineLib, engineLibErr = build(nil, files)
	})
	return engineLib, engineLibErr
}

type namedText struct{ name, text string }

// build returns base followed by the chunks of files, each file's in
// order. It fails when a file holds anything but chunks, when a name is
// defined twice, or when a chunk uses one that comes after it.
func build(base library, files []namedText) (library, error) {
	l := slices.Clone(base)
	for _, f := range files {
		cs, err := chunks(f.name, f.text)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			for _, n := range c.names {
				if i := l.defining(n); i >= 0 {
					return nil, fmt.Errorf("lua: %s defines %s, which %s defines", f.name, n, l[i].file)
				}
			}
			l = append(l, c)
		}
	}
	for i := len(base); i < len(l); i++ {
		n := namesOf(l[i].code)
		for j := range l {
			if j == i || !l[j].usedIn(n) {
				continue
			}
			if j > i {
				return nil, fmt.Errorf("lua: %s: %s uses %s before its definition (in %s)", l[i].file, l[i].names[0], l[j].names[0], l[j].file)
			}
			l[i].deps = append(l[i].deps, j)
		}
	}
	return l, nil
}

// defining returns the index of the chunk that defines name, or -1.
func (l library) defining(name string) int {
	for i, c := range l {
		if slices.Contains(c.names, name) {
			return i
		}
	}
	return -1
}

// Names returns the names the engine's library defines, functions and
// values: a package's Lua may not declare them (see TestLuaWrittenOnce).
func Names() ([]string, error) {
	l, err := lib()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range l {
		out = append(out, c.names...)
	}
	return out, nil
}

var (
	localFunction = regexp.MustCompile(`^local\s+function\s+(\w+)\s*\(`)
	localValues   = regexp.MustCompile(`^local\s+([\w\s,]+?)\s*(=|$)`)
)

// chunks splits a chunk file. Paragraphs (runs of lines between blank
// lines) of comments alone are the file's commentary, left out of
// scripts; in the others, each line at the left margin starts a
// definition (local function, or local values), with the comment lines
// just above it, or is the end of one.
func chunks(file, text string) ([]chunk, error) {
	var out []chunk
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	start := -1 // the first line of the chunk being read
	flush := func(end int) {
		if start < 0 {
			return
		}
		t := strings.Join(lines[start:end], "\n") + "\n"
		out[len(out)-1].text = t
		out[len(out)-1].code = Code(t)
		start = -1
	}
	comments := -1 // the first of the comment lines just above
	for i, l := range lines {
		switch {
		case strings.TrimSpace(l) == "":
			flush(i)
			comments = -1
		case strings.HasPrefix(l, "--"):
			if comments < 0 {
				comments = i
			}
		case l[0] == ' ' || l[0] == '\t' || l == "end" || strings.HasPrefix(l, "end "):
			if start < 0 {
				return nil, fmt.Errorf("lua: %s:%d: a line outside any definition", file, i+1)
			}
			comments = -1
		default:
			c := chunk{file: file}
			if m := localFunction.FindStringSubmatch(l); m != nil {
				c.names = []string{m[1]}
			} else if m := localValues.FindStringSubmatch(Code(l)); m != nil {
				c.value = true
				for n := range strings.SplitSeq(m[1], ",") {
					c.names = append(c.names, strings.TrimSpace(n))
				}
			} else {
				return nil, fmt.Errorf("lua: %s:%d: %q: a chunk file holds only local functions and values", file, i+1, l)
			}
			from := i
			if comments >= 0 {
				from = comments
			}
			flush(from)
			start, comments = from, -1
			out = append(out, c)
		}
	}
	flush(len(lines))
	return out, nil
}

// Source returns the text of s:
//
//	[the chunks Head uses] Head [the other chunks Body uses] Body
//
// each group of chunks in the library's order, the engine's before the
// package's. A name the script's own files declare at the left margin is
// theirs, not a use of the library's. Source fails when a file cannot be
// read, when a file of Lib holds anything but chunks or a name a chunk
// before it defines, when a chunk uses one after it, when Head uses a
// value, or when the script's files declare the name of a chunk the
// script holds.
func Source(s Spec) (string, error) {
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(s.FS, path.Join("lua", name))
		if err != nil {
			return "", fmt.Errorf("lua: script %s: %w", s.Name, err)
		}
		return string(b), nil
	}
	l, err := lib()
	if err != nil {
		return "", err
	}
	if len(s.Lib) > 0 {
		var files []namedText
		for _, f := range s.Lib {
			text, err := read(f)
			if err != nil {
				return "", err
			}
			files = append(files, namedText{f, text})
		}
		if l, err = build(l, files); err != nil {
			return "", fmt.Errorf("lua: script %s: %w", s.Name, err)
		}
	}
	var head string
	if s.Head != "" {
		if head, err = read(s.Head); err != nil {
			return "", err
		}
	}
	var body strings.Builder
	for _, f := range s.Body {
		text, err := read(f)
		if err != nil {
			return "", err
		}
		body.WriteString(text)
	}
	own := Declared(head + body.String())
	early := l.usedBy(Code(head), own)
	late := l.usedBy(Code(body.String()), own)
	for i, c := range l {
		if early[i] && c.value {
			return "", fmt.Errorf("lua: script %s: its head %s uses %s, which comes after it", s.Name, s.Head, c.names[0])
		}
		for _, n := range c.names {
			if (early[i] || late[i]) && slices.Contains(own, n) {
				return "", fmt.Errorf("lua: script %s declares %s, which a chunk it holds (%s) defines", s.Name, n, c.file)
			}
		}
	}
	var b strings.Builder
	for i, c := range l {
		if early[i] {
			b.WriteString(c.text)
		}
	}
	b.WriteString(head)
	for i, c := range l {
		if late[i] && !early[i] {
			b.WriteString(c.text)
		}
	}
	b.WriteString(body.String())
	return b.String(), nil
}

// usedBy returns which chunks code uses, directly or through others; a
// name in own is code's, not a use.
func (l library) usedBy(code string, own []string) []bool {
	in := make([]bool, len(l))
	n := namesOf(code)
	var add func(i int)
	add = func(i int) {
		if in[i] {
			return
		}
		in[i] = true
		for _, j := range l[i].deps {
			add(j)
		}
	}
	for i, c := range l {
		if slices.ContainsFunc(c.names, func(n string) bool { return slices.Contains(own, n) }) {
			continue
		}
		if c.usedIn(n) {
			add(i)
		}
	}
	return in
}

// Declared returns the names src declares at the left margin: its local
// functions and local values (global functions too, which dlock's Lua
// never defines).
func Declared(src string) []string {
	var out []string
	for l := range strings.SplitSeq(Code(src), "\n") {
		if m := leftFunction.FindStringSubmatch(l); m != nil {
			out = append(out, m[1])
		} else if m := localValues.FindStringSubmatch(l); m != nil {
			for n := range strings.SplitSeq(m[1], ",") {
				out = append(out, strings.TrimSpace(n))
			}
		}
	}
	return out
}

var leftFunction = regexp.MustCompile(`^(?:local\s+)?function\s+(\w+)\s*\(`)

// Code returns src with its comments and string literals blanked (each
// byte a space, line breaks kept), so that names are looked for in code
// alone.
func Code(src string) string {
	b := []byte(src)
	blank := func(i, j int) {
		for k := i; k < j && k < len(b); k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	for i := 0; i < len(b); {
		switch {
		case b[i] == '-' && i+1 < len(b) && b[i+1] == '-':
			end := 0
			if lvl, ok := longOpen(b, i+2); ok {
				end = longClose(b, i+2, lvl)
			} else {
				end = i + 2
				for end < len(b) && b[end] != '\n' {
					end++
				}
			}
			blank(i, end)
			i = end
		case b[i] == '\'' || b[i] == '"':
			q, end := b[i], i+1
			for end < len(b) && b[end] != q && b[end] != '\n' {
				if b[end] == '\\' {
					end++
				}
				end++
			}
			blank(i, end+1)
			i = end + 1
		case b[i] == '[':
			if lvl, ok := longOpen(b, i); ok {
				end := longClose(b, i, lvl)
				blank(i, end)
				i = end
				continue
			}
			i++
		default:
			i++
		}
	}
	return string(b)
}

// longOpen reports whether a long bracket ([[, [=[, ...) opens at i, and
// its level.
func longOpen(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return 0, false
	}
	j := i + 1
	for j < len(b) && b[j] == '=' {
		j++
	}
	if j < len(b) && b[j] == '[' {
		return j - i - 1, true
	}
	return 0, false
}

// longClose returns the index just past the long bracket of level lvl
// that closes the one opening at i, or len(b).
func longClose(b []byte, i, lvl int) int {
	closing := "]" + strings.Repeat("=", lvl) + "]"
	if k := strings.Index(string(b[i+lvl+2:]), closing); k >= 0 {
		return i + lvl + 2 + k + len(closing)
	}
	return len(b)
}

// Script returns s as a script, registered under s.Name. It panics on
// Source's error and on a name registered already: the files are
// embedded and the specs are package variables, so either is a mistake in
// the build, which the package's first test finds.
func Script(s Spec) *node.Script {
	src, err := Source(s)
	if err != nil {
		panic(err)
	}
	sc := node.NewScript(src)
	if s.After != nil {
		sc = node.NewScriptAfter(s.After, src)
	}
	register(s.Name, sc)
	return sc
}

// Named is one registered script.
type Named struct {
	Name   string
	Script *node.Script
}

var registry struct {
	sync.Mutex
	byName map[string]*node.Script
}

func register(name string, s *node.Script) {
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]*node.Script{}
	}
	if _, ok := registry.byName[name]; ok {
		panic("lua: script " + name + " registered twice")
	}
	registry.byName[name] = s
}

// Scripts returns the registered scripts whose name starts with prefix,
// in name order: those of the packages linked into the program.
func Scripts(prefix string) []Named {
	registry.Lock()
	defer registry.Unlock()
	var out []Named
	for name, s := range registry.byName {
		if strings.HasPrefix(name, prefix) {
			out = append(out, Named{name, s})
		}
	}
	slices.SortFunc(out, func(a, b Named) int { return strings.Compare(a.Name, b.Name) })
	return out
}
