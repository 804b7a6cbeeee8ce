package engine

import (
	"slices"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/node"
)

// Named is one registered script.
type Named struct {
	Name   string
	Script *node.Script
}

var registry struct {
	sync.Mutex
	byName map[string]*node.Script
}

// Register records s under name and returns it. It panics when name is
// taken: package variables register their scripts, so a name used twice
// is a mistake in the build, which the first test of the package finds.
func Register(name string, s *node.Script) *node.Script {
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]*node.Script{}
	}
	if _, ok := registry.byName[name]; ok {
		panic("engine: script " + name + " registered twice")
	}
	registry.byName[name] = s
	return s
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
