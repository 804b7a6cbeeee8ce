// Package plant breaks the library's scripts for a test, from outside
// the library: a Node that runs another script in place of the one it is
// given (Swapping), and rewrites of a script's lines (Replace) checked
// against the source tree, so that a change of those lines fails the test
// instead of leaving the library unbroken. A checker shows it can fail by
// finding what a broken script lets through; production code carries no
// switch for it.
package plant

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/node"
)

// Swapping returns a Node that runs swap(s) in place of each script s,
// in Eval and in Pipeline; everything else goes to n as it is.
func Swapping(n node.Node, swap func(*node.Script) *node.Script) node.Node {
	return swapping{n, swap}
}

type swapping struct {
	node.Node
	swap func(*node.Script) *node.Script
}

func (n swapping) Eval(ctx context.Context, s *node.Script, keys []string, args ...string) (node.Reply, error) {
	return n.Node.Eval(ctx, n.swap(s), keys, args...)
}

func (n swapping) Pipeline(ctx context.Context, calls []node.Call, wait node.Wait) ([]node.Result, int, error) {
	changed := make([]node.Call, len(calls))
	for i, c := range calls {
		c.Script = n.swap(c.Script)
		changed[i] = c
	}
	return n.Node.Pipeline(ctx, changed, wait)
}

// Source reads a file of the source tree by its path from the
// repository's root: the first folder above the test's own (a test runs
// in its package's folder) that holds dlock's go.mod. Not from the
// source's path in the binary, which -trimpath makes a module path.
func Source(path string) ([]byte, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(mod), "module github.com/dlockgo/dlock\n") {
			return os.ReadFile(filepath.Join(dir, path))
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil, fmt.Errorf("plant: no dlock go.mod above the working folder, for %s", path)
		}
		dir = up
	}
}

// Edit is a piece of a script's file, Old, and what a plant makes of it,
// New.
type Edit struct{ File, Old, New string }

// Replace returns a swap, for Swapping, that runs in place of every
// script whose source holds the Old of each edit that script with each
// Old replaced by its New, and runs every other script as it is. A script
// a server runs after another (node.NewScriptAfter) is rewritten together
// with that first one. Each script's rewritten form is built once.
//
// Replace fails unless each edit's File holds its Old exactly once.
func Replace(edits ...Edit) (func(*node.Script) *node.Script, error) {
	pairs := make([]string, 0, 2*len(edits))
	for _, e := range edits {
		src, err := Source(e.File)
		if err != nil {
			return nil, fmt.Errorf("plant: %w", err)
		}
		if strings.Count(string(src), e.Old) != 1 {
			return nil, fmt.Errorf("plant: %s no longer holds %q once", e.File, e.Old)
		}
		pairs = append(pairs, e.Old, e.New)
	}
	r := &rewrite{edits: edits, lines: strings.NewReplacer(pairs...)}
	return r.swap, nil
}

type rewrite struct {
	edits   []Edit
	lines   *strings.Replacer
	scripts sync.Map // *node.Script -> *node.Script, itself when untouched
}

func (r *rewrite) swap(s *node.Script) *node.Script {
	if s == nil {
		return nil
	}
	if b, ok := r.scripts.Load(s); ok {
		return b.(*node.Script)
	}
	b := s
	src := s.Source()
	if r.holds(src) {
		b = node.NewScript(r.lines.Replace(src))
		if first := s.First(); first != nil {
			b = node.NewScriptAfter(r.swap(first), b.Source())
		}
	}
	b2, _ := r.scripts.LoadOrStore(s, b)
	return b2.(*node.Script)
}

func (r *rewrite) holds(src string) bool {
	for _, e := range r.edits {
		if !strings.Contains(src, e.Old) {
			return false
		}
	}
	return true
}

// The line of rwlock's claim that decides whether a reader raises the
// counter, and the rule before readers raised it: only a counter never
// drawn from is.
const (
	raised   = "    if attempts == 0 or st[6] ~= fmt(attempts) or st[7] ~= run then\n"
	unraised = "    if attempts == 0 then\n"
)

// UnraisedReaders returns a swap that runs package rwlock's claim under
// the rule before the first reader after a writer raised the counter:
// readers take the token of the writer before them, so that a late write
// of that writer, paused past its lease, passes a fence the readers have
// shown their token to. The checkers that must find that gap run a
// Locker on a Swapping node with it.
func UnraisedReaders() (func(*node.Script) *node.Script, error) {
	return Replace(Edit{"rwlock/lua/claim.lua", raised, unraised})
}
