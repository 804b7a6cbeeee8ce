package engine

import (
	_ "embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/node"
)

// The library: the prelude of the single-server primitives' scripts, and
// the parts of it that only some of them use. See lua/core.lua.
var (
	//go:embed lua/core.lua
	coreLua string
	//go:embed lua/gone.lua
	goneLua string
	//go:embed lua/queue.lua
	queueLua string

	// The calls that bring gone.lua and queue.lua in: each local function
	// a script defines costs the server a closure at every run of it.
	callsGone  = regexp.MustCompile(`\b(bury|buried)\(`)
	callsQueue = regexp.MustCompile(`\b(enqueue|ticket|head)\(`)
)

// Spec is one script: files of a package's embedded lua/, after the
// library's prelude when it asks for it.
type Spec struct {
	// Name is the registry's key: the package, then the transition, then
	// any variant ("single/claim", "quorum/vote+token+check").
	Name string
	// FS holds the package's files, read as "lua/" + each name.
	FS fs.FS
	// Head, when set, is a file run first, before the prelude: it may
	// answer without the prelude's clock (single's fast_*.lua).
	Head string
	// Prelude puts lua/core.lua before Body, and after it gone.lua when
	// Body calls bury or buried, and queue.lua when Body calls enqueue,
	// ticket or head.
	Prelude bool
	// Body is the package's files, in order.
	Body []string
	// After, when set, is the script a server must have run before this
	// one (node.NewScriptAfter).
	After *node.Script
}

// Source returns the text of s: Head, the prelude when s asks for it,
// then Body. It fails when a file cannot be read.
func Source(s Spec) (string, error) {
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(s.FS, path.Join("lua", name))
		if err != nil {
			return "", fmt.Errorf("engine: script %s: %w", s.Name, err)
		}
		return string(b), nil
	}
	var b strings.Builder
	if s.Head != "" {
		head, err := read(s.Head)
		if err != nil {
			return "", err
		}
		b.WriteString(head)
	}
	var body strings.Builder
	for _, f := range s.Body {
		text, err := read(f)
		if err != nil {
			return "", err
		}
		body.WriteString(text)
	}
	if s.Prelude {
		b.WriteString(coreLua)
		if callsGone.MatchString(body.String()) {
			b.WriteString(goneLua)
		}
		if callsQueue.MatchString(body.String()) {
			b.WriteString(queueLua)
		}
	}
	b.WriteString(body.String())
	return b.String(), nil
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
		panic("engine: script " + name + " registered twice")
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
