package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's folder.
const root = "../../.."

// doc is one markdown file: its path from the root, and its lines.
type doc struct {
	path  string
	lines []string
}

// docs reads the checked docs: README.md, CONTRIBUTING.md, docs/*.md and the Unreleased
// section of CHANGELOG.md (the released ones describe code as it was).
// docs/results/ is generated from the runs it reports, and left out.
func docs(t *testing.T) []doc {
	t.Helper()
	paths := []string{"README.md", "CONTRIBUTING.md"}
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md {
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, rel)
	}
	var out []doc
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc{p, strings.Split(string(b), "\n")})
	}
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	var unreleased []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.HasPrefix(l, "## [Unreleased]")
		}
		if in {
			unreleased = append(unreleased, l)
		} else {
			unreleased = append(unreleased, "") // keeps line numbers
		}
	}
	return append(out, doc{"CHANGELOG.md", unreleased})
}

// module is what the module declares: its packages by folder, the test
// functions in each, and each package's exported names, with the methods
// and fields of its types.
type module struct {
	pkgs   map[string]bool            // folder from the root ("" for the root)
	byName map[string][]string        // package name as docs write it (dlock for the root) -> folders
	tests  map[string]map[string]bool // folder -> Test/Benchmark/Example/Fuzz functions
	names  map[string]map[string]bool // folder -> "Name" and "Type.Member"
	files  map[string]bool            // base names of every file in the repository
	// checked are the functions go test runs and judges: Test and Fuzz
	// functions, and examples with an output comment.
	checked map[string]map[string]bool // folder -> names
}

func load(t *testing.T) *module {
	t.Helper()
	m := &module{pkgs: map[string]bool{}, byName: map[string][]string{}, tests: map[string]map[string]bool{},
		names: map[string]map[string]bool{}, files: map[string]bool{}, checked: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		m.files[d.Name()] = true
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "." {
			dir = ""
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(p, "_test.go")
		if !test && !m.pkgs[dir] {
			m.pkgs[dir] = true
			name := f.Name.Name
			if dir == "" {
				name = "dlock"
			}
			m.byName[name] = append(m.byName[name], dir)
		}
		if m.tests[dir] == nil {
			m.tests[dir], m.names[dir], m.checked[dir] = map[string]bool{}, map[string]bool{}, map[string]bool{}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if test && d.Recv == nil && testFunc.MatchString(d.Name.Name) {
					m.tests[dir][d.Name.Name] = true
					if !strings.HasPrefix(d.Name.Name, "Example") && !strings.HasPrefix(d.Name.Name, "Benchmark") || hasOutput(f, d) {
						m.checked[dir][d.Name.Name] = true
					}
				}
				if test || !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					m.names[dir][d.Name.Name] = true
				} else if typ := recvType(d.Recv.List[0].Type); typ != "" {
					m.names[dir][typ+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				if test {
					continue
				}
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						m.names[dir][s.Name.Name] = true
						members(m.names[dir], s)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							m.names[dir][n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hasOutput says whether an example has an output comment, which go test
// checks.
func hasOutput(f *ast.File, d *ast.FuncDecl) bool {
	for _, c := range f.Comments {
		if c.Pos() < d.Body.Lbrace || c.End() > d.Body.Rbrace {
			continue
		}
		t := strings.TrimSpace(strings.ToLower(c.Text()))
		if strings.HasPrefix(t, "output:") || strings.HasPrefix(t, "unordered output:") {
			return true
		}
	}
	return false
}

// recvType is the name of a method's receiver type.
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// members records a struct's fields and an interface's methods as
// "Type.Name".
func members(names map[string]bool, s *ast.TypeSpec) {
	var fields []*ast.Field
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields.List
	case *ast.InterfaceType:
		fields = t.Methods.List
	}
	for _, f := range fields {
		for _, n := range f.Names {
			names[s.Name.Name+"."+n.Name] = true
		}
		if len(f.Names) == 0 { // embedded: its name is the type's
			if n := recvType(f.Type); n != "" {
				names[s.Name.Name+"."+n] = true
			}
		}
	}
}

var (
	testFunc = regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)($|[A-Z_])`)
	// testRef is a test function named in prose: TestX, pkg.TestX,
	// TestX/sub (only TestX is checked).
	testRef  = regexp.MustCompile(`(?:\b([a-z][a-z0-9]*)\.)?\b((?:Test|Benchmark|Example|Fuzz)(?:[A-Z_]\w*)?)\b(\*?)`)
	codeSpan = regexp.MustCompile("`([^`]+)`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// exts are the file extensions a path in a doc may end with.
	exts = []string{".go", ".lua", ".md", ".sh", ".pml", ".json", ".svg", ".txt", ".mod", ".sum", ".conf", ".yml", ".yaml", ".toml"}
	// qualified is pkg.Name or pkg.Type.Name, maybe called.
	qualified = regexp.MustCompile(`^\(?\*?([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\)?\.([A-Z]\w*))?(?:\(.*\))?$`)
)

// prose calls f with every line of d outside fenced code blocks, and its
// number.
func (d doc) prose(f func(n int, line string)) {
	fenced := false
	for i, l := range d.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			f(i+1, l)
		}
	}
}

// TestDocsNames fails for every test, file, package or exported
// identifier a doc names that the module does not have.
func TestDocsNames(t *testing.T) {
	m := load(t)
	total := 0
	for _, d := range docs(t) {
		errs, n := m.check(d)
		total += n
		for _, e := range errs {
			t.Error(e)
		}
	}
	t.Logf("%d names checked", total)
	if total < 300 {
		t.Errorf("only %d names checked: the docs name far more (the patterns no longer find them?)", total)
	}
}

// check checks the names in d's prose; it returns what is wrong, and how
// many names it checked.
func (m *module) check(d doc) (errs []string, checked int) {
	dir := filepath.Dir(d.path)
	d.prose(func(n int, line string) {
		at := fmt.Sprintf("%s:%d", d.path, n)
		for _, ref := range testRef.FindAllStringSubmatch(line, -1) {
			checked++
			if msg := m.checkTest(ref[1], ref[2], ref[3] == "*"); msg != "" {
				errs = append(errs, fmt.Sprintf("%s: %s", at, msg))
			}
		}
		for _, s := range codeSpan.FindAllStringSubmatch(line, -1) {
			msg, ok := m.checkSpan(dir, s[1], d.path != "CHANGELOG.md")
			if ok {
				checked++
			}
			if msg != "" {
				errs = append(errs, fmt.Sprintf("%s: `%s`: %s", at, s[1], msg))
			}
		}
		for _, l := range link.FindAllStringSubmatch(line, -1) {
			target := l[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			target, _, _ = strings.Cut(target, "#")
			if !exists(filepath.Join(root, dir, target)) {
				errs = append(errs, fmt.Sprintf("%s: link to %s: no such file", at, l[1]))
			}
		}
	})
	return errs, checked
}

// checkTest checks a test function named in a doc, with the package name
// that qualifies it ("" for none); prefix (TestX* in the doc) asks for
// any test whose name starts so.
func (m *module) checkTest(pkg, name string, prefix bool) string {
	if name == "Test" || name == "Example" || name == "Benchmark" || name == "Fuzz" {
		return "" // the word, not a name
	}
	has := func(tests map[string]bool) bool {
		if !prefix {
			return tests[name]
		}
		for n := range tests {
			if strings.HasPrefix(n, name) {
				return true
			}
		}
		return false
	}
	dirs := m.byName[pkg]
	if pkg == "" || dirs == nil {
		// Unqualified, or qualified by something that is not one of
		// the module's packages (then it reads as unqualified).
		for _, tests := range m.tests {
			if has(tests) {
				return ""
			}
		}
		return fmt.Sprintf("no test function %s in the module", name)
	}
	for _, dir := range dirs {
		if has(m.tests[dir]) {
			return ""
		}
	}
	return fmt.Sprintf("no test function %s in package %s", name, pkg)
}

// checkSpan checks one code span of the prose of a doc in dir; idents
// false leaves pkg.Name alone (a changelog names what was removed).
func (m *module) checkSpan(dir, s string, idents bool) (msg string, checked bool) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, " \t") {
		return "", false // a command, an expression: not a name
	}
	if i := strings.LastIndex(s, "."); i > 0 && strings.Contains(s[:i], "/") && m.pkgs[strings.TrimPrefix(s[:i], "./")] {
		// internal/testkit/faults.TestX, internal/redisproc.ServerPath: a
		// package by its folder, and a name in it.
		dir, name := strings.TrimPrefix(s[:i], "./"), s[i+1:]
		if testFunc.MatchString(name) {
			if m.tests[dir][name] {
				return "", true
			}
			return fmt.Sprintf("no test function %s in %s", name, dir), true
		}
		if !idents || m.names[dir][name] {
			return "", true
		}
		return fmt.Sprintf("%s declares no exported %s", dir, name), true
	}
	if testFunc.MatchString(s) || strings.Contains(s, ".Test") || strings.Contains(s, ".Benchmark") || strings.Contains(s, ".Example") || strings.Contains(s, ".Fuzz") {
		return "", false // a test, maybe with a subtest: TestDocsNames checks it in the prose
	}
	if rest, ok := strings.CutPrefix(s, "github.com/dlockgo/dlock"); ok {
		rest = strings.TrimPrefix(strings.TrimSuffix(rest, "/..."), "/")
		rest, _, _ = strings.Cut(rest, "@")
		if !m.pkgs[rest] && !exists(filepath.Join(root, rest, "go.mod")) {
			return "no such package in the module", true
		}
		return "", true
	}
	if q := qualified.FindStringSubmatch(s); q != nil {
		dirs := m.byName[q[1]]
		if dirs == nil || !idents {
			return "", false // another module's package
		}
		name := q[2]
		if q[3] != "" {
			name += "." + q[3]
		}
		for _, d := range dirs {
			if m.names[d][name] {
				return "", true
			}
		}
		return fmt.Sprintf("package %s declares no exported %s", q[1], name), true
	}
	if p, ok := path(s); ok {
		if strings.HasPrefix(p, "../shared/") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
			return "", false // the workplace's, or the user's machine
		}
		if !strings.Contains(strings.TrimSuffix(p, "/"), "/") {
			if m.files[p] || exists(filepath.Join(root, p)) || exists(filepath.Join(root, dir, p)) {
				return "", true
			}
			return "no file of that name in the repository", true
		}
		if exists(filepath.Join(root, p)) || exists(filepath.Join(root, dir, p)) {
			return "", true
		}
		for pkg := range m.pkgs { // lua/claim.lua, in a package's own doc
			if exists(filepath.Join(root, pkg, p)) {
				return "", true
			}
		}
		return "no such file or folder", true
	}
	return "", false
}

// path returns s as a path of the repository, when it reads as one: no
// URL, key pattern or flag, and a slash or a known extension.
func path(s string) (string, bool) {
	if strings.Contains(s, "://") || strings.ContainsAny(s, "{}*<>$=|,;:'\"()[]") || strings.HasPrefix(s, "-") {
		return "", false
	}
	s, _, _ = strings.Cut(s, "#")
	s = strings.TrimPrefix(s, "./")
	s = strings.TrimSuffix(s, "/...")
	if s == "" || s == "." {
		return "", false
	}
	if first, _, ok := strings.Cut(s, "/"); ok {
		// A path of the repository starts at one of its folders; log/slog
		// and N/2+1 do not.
		return s, exists(filepath.Join(root, first)) || slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(s, e) })
	}
	if slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(s, e) && len(s) > len(e) }) {
		return s, true
	}
	return "", false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestDocsLayout fails for every package of the repository that the
// Layout of CONTRIBUTING.md does not name.
func TestDocsLayout(t *testing.T) {
	m := load(t)
	b, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md has no Layout section")
	}
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```")
	n := 0
	for dir := range m.pkgs {
		if dir == "" {
			continue
		}
		n++
		if !named(block, dir) {
			t.Errorf("CONTRIBUTING.md's Layout does not name %s/", dir)
		}
	}
	t.Logf("%d packages named", n)
}

// TestDocsExamples fails for a runnable example that imports a package a
// reader cannot: one under internal/. An example is shown on pkg.go.dev
// as it is written, and must run where it is copied to.
func TestDocsExamples(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		examples := false
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
				examples = true
				n++
			}
		}
		if !examples {
			return nil
		}
		for _, imp := range f.Imports {
			if path := strings.Trim(imp.Path.Value, `"`); strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s: an example file imports %s, which a reader cannot", rel, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d examples", n)
	if n == 0 {
		t.Error("no examples found")
	}
}

// named says whether the Layout block names dir: in full, or as the
// last part of an indented line under the line that names its parent
// ("internal/testkit/" then "  nemesis/").
func named(block, dir string) bool {
	if regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(dir) + `/?([\s,]|$)`).MatchString(block) {
		return true
	}
	parent, base := filepath.Split(dir)
	if parent == "" {
		return false
	}
	under := false
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, " ") {
			under = strings.HasPrefix(l, parent+" ") || strings.HasPrefix(l, parent+"\t") || l == parent
			continue
		}
		if under && regexp.MustCompile(`(^|[\s,])`+regexp.QuoteMeta(base)+`/([\s,]|$)`).MatchString(l) {
			return true
		}
	}
	return false
}

// luaRef finds a .lua file named in a line; exampleRef a Go test file
// (where runnable examples live).
var (
	luaRef     = regexp.MustCompile("[`(]([\\w./-]+\\.lua)[`)#]")
	exampleRef = regexp.MustCompile("[`(]([\\w./-]+\\.go)[`)#]")
)

// TestDocsScripts fails for every ```lua block of a doc that names no
// script file in the three lines before it, or whose lines the named file
// does not hold, in order and together (blank and comment-only lines
// aside; a "..." line skips lines of the file).
func TestDocsScripts(t *testing.T) {
	n := 0
	for _, d := range docs(t) {
		errs, blocks := scripts(d)
		n += blocks
		for _, e := range errs {
			t.Error(e)
		}
	}
	t.Logf("%d Lua blocks checked", n)
}

// TestDocsExampleCode fails for every ```go block of a doc that names a Go
// test file in the three lines before it (docs/migrating.md shows its
// runnable examples so) whose lines that file does not hold, in order and
// together (blank and comment-only lines aside; a "..." line skips lines
// of the file): the code a doc shows is code that compiled and ran.
func TestDocsExampleCode(t *testing.T) {
	n := 0
	for _, d := range docs(t) {
		errs, blocks := examples(d)
		n += blocks
		for _, e := range errs {
			t.Error(e)
		}
	}
	t.Logf("%d Go blocks checked against their examples", n)
	if n == 0 {
		t.Error("no Go block checked: docs/migrating.md shows its examples' code")
	}
}

// scripts checks d's Lua blocks; it returns what is wrong, and how many
// blocks it checked.
func scripts(d doc) (errs []string, blocks int) {
	return blocksOf(d, "lua", luaRef, "--", true)
}

// examples checks d's Go blocks that name a test file.
func examples(d doc) (errs []string, blocks int) {
	return blocksOf(d, "go", exampleRef, "//", false)
}

// blocksOf checks d's ```lang blocks against the file that ref finds in
// the three lines before each (comment is the language's line comment);
// a block that names none is an error when named, else left alone.
func blocksOf(d doc, lang string, ref *regexp.Regexp, comment string, named bool) (errs []string, blocks int) {
	dir := filepath.Dir(d.path)
	for i := 0; i < len(d.lines); i++ {
		if strings.TrimSpace(d.lines[i]) != "```"+lang {
			continue
		}
		start := i + 1
		end := start
		for end < len(d.lines) && strings.TrimSpace(d.lines[end]) != "```" {
			end++
		}
		block := d.lines[start:end]
		i = end
		at := fmt.Sprintf("%s:%d", d.path, start)
		var file string
		for j := start - 2; j >= 0 && j >= start-4 && file == ""; j-- {
			if r := ref.FindStringSubmatch(d.lines[j]); r != nil {
				file = r[1]
			}
		}
		if file == "" {
			if named {
				blocks++
				errs = append(errs, fmt.Sprintf("%s: a Lua block that names no script file in the three lines before it", at))
			}
			continue
		}
		blocks++
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			b, err = os.ReadFile(filepath.Join(root, dir, file))
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: the %s block's file %s: %v", at, langName[lang], file, err))
			continue
		}
		if msg := holdsIn(code(strings.Split(string(b), "\n"), comment), block, comment); msg != "" {
			errs = append(errs, fmt.Sprintf("%s: the %s block differs from %s: %s", at, langName[lang], file, msg))
		}
	}
	return errs, blocks
}

// langName is how errors name a block's language.
var langName = map[string]string{"lua": "Lua", "go": "Go"}

// code drops blank and comment-only lines (comment: "--" for Lua, "//"
// for Go), and trailing spaces.
func code(lines []string, comment string) []string {
	var out []string
	for _, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, comment) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// holds says why a Lua file (as code returns it) does not hold block, or
// "".
func holds(file, block []string) string { return holdsIn(file, block, "--") }

// holdsIn is holds for a language whose line comment is comment.
func holdsIn(file, block []string, comment string) string {
	var parts [][]string
	var cur []string
	for _, l := range block {
		if strings.TrimSpace(l) == "..." {
			parts = append(parts, code(cur, comment))
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	parts = append(parts, code(cur, comment))
	from := 0
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		at := -1
		for k := from; k+len(p) <= len(file); k++ {
			if slices.Equal(file[k:k+len(p)], p) {
				at = k
				break
			}
		}
		if at < 0 {
			return fmt.Sprintf("no run of its lines from %q on matches the file (first line that does not: %q)", p[0], firstMiss(file[from:], p))
		}
		from = at + len(p)
	}
	return ""
}

// firstMiss is the first line of p after the longest prefix of p that file
// holds together.
func firstMiss(file, p []string) string {
	best := 0
	for k := range file {
		n := 0
		for n < len(p) && k+n < len(file) && file[k+n] == p[n] {
			n++
		}
		best = max(best, n)
	}
	if best >= len(p) {
		return ""
	}
	return p[best]
}

// TestDocsCheckCatches plants wrong names and an edited script in a doc of
// its own, and wants each reported; the same doc with the names right
// passes.
func TestDocsCheckCatches(t *testing.T) {
	m := load(t)
	wrong := doc{"docs/planted.md", strings.Split(strings.Join([]string{
		"`single.TestNoSuchTest` and TestNoSuchEither/sub run it;",
		"see `single/no_such.go`, `lease.NoSuchThing`, `lease.Lease.NoSuchMethod`,",
		"`github.com/dlockgo/dlock/nosuch`, `internal/testkit/faults.TestNoSuch` and [this](nosuch.md).",
	}, "\n"), "\n")}
	errs, _ := m.check(wrong)
	for _, want := range []string{"TestNoSuchTest", "TestNoSuchEither", "single/no_such.go", "lease.NoSuchThing",
		"lease.Lease.NoSuchMethod", "dlock/nosuch", "internal/testkit/faults.TestNoSuch", "nosuch.md"} {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("planted %s: not reported (reports: %q)", want, errs)
		}
	}
	right := doc{"docs/planted.md", strings.Split(strings.Join([]string{
		"`single.TestFailoverFenced` and TestReplicasHandoffWaits/go-redis run it;",
		"see `single/claim.go`, `lease.ErrTaken`, `lease.Lease.Release`, `single.Locker.Acquire`,",
		"`github.com/dlockgo/dlock/single`, `internal/testkit/faults.TestFailoverRace` and [this](fencing.md).",
	}, "\n"), "\n")}
	if errs, n := m.check(right); len(errs) > 0 || n < 9 {
		t.Errorf("right names: %d checked, reports %q; want 9 or more and none", n, errs)
	}

	script, err := os.ReadFile(filepath.Join(root, "single/lua/extend.lua"))
	if err != nil {
		t.Fatal(err)
	}
	lines := code(strings.Split(string(script), "\n"), "--")
	// The script's first four lines, one of which compares with <=.
	block := slices.Clone(lines[:4])
	at := slices.IndexFunc(block, func(l string) bool { return strings.Contains(l, "<=") })
	if at < 0 {
		t.Fatalf("single/lua/extend.lua: no <= in its first four lines: %q", block)
	}
	if msg := holds(lines, block); msg != "" {
		t.Fatalf("the script's own lines: %s", msg)
	}
	if msg := holds(lines, append(slices.Clone(lines[:1]), append([]string{"..."}, lines[len(lines)-2:]...)...)); msg != "" {
		t.Fatalf("an excerpt with ...: %s", msg)
	}
	block[at] = strings.Replace(block[at], "<=", "<", 1) // a lease revived at its last ms
	if holds(lines, block) == "" {
		t.Errorf("an edited line (%q) passed", block[at])
	}
	if holds(lines, []string{lines[1], lines[0]}) == "" {
		t.Error("two lines out of order passed")
	}
	// A Go block that shows an example's lines, and the same with one
	// edited.
	example := []string{"`migrate_example_test.go`:", "", "```go",
		"\tl, err := locker.TryAcquire(ctx, \"report\", option.TTL(10*time.Second), option.Metadata(\"host=web-4\"))",
		"\tif err != nil {", "```"}
	if errs, n := examples(doc{"docs/planted.md", example}); n != 1 || len(errs) > 0 {
		t.Errorf("an example's own lines: %d blocks, reports %q; want 1 and none", n, errs)
	}
	example[3] = strings.Replace(example[3], "10*time.Second", "time.Second", 1)
	if errs, n := examples(doc{"docs/planted.md", example}); n != 1 || len(errs) != 1 {
		t.Errorf("an edited example line: %d blocks, reports %q; want 1 and one", n, errs)
	}

	// Guarantees: one that names no test, one whose test does not exist,
	// a marker with no reason, a marker on a paragraph that promises
	// nothing, and a marker with nothing after it; then the same promises
	// held, exempted or left pending, and one in a code block.
	promised := doc{"docs/planted.md", strings.Split(strings.Join([]string{
		"A lease is never granted twice.",
		"",
		"- A stale token is always refused (`TestNoSuchGuarantee`).",
		"",
		"<!-- not a guarantee -->",
		"This is never a good idea.",
		"",
		"| `dlock run` | exits 76 on a lost lease |",
		"<!-- not a guarantee: says nothing -->",
		"A plain sentence.",
		"",
		"<!-- not a guarantee: the end -->",
		"",
		"A stale write is always refused (`fence.ExamplePlanted`).",
	}, "\n"), "\n")}
	m.tests["fence"]["ExamplePlanted"] = true // an example without an output comment
	errs, n := m.guarantees(promised, nil)
	for _, want := range []string{"planted.md:1: a guarantee that names no test", "planted.md:3: a guarantee held by a test that does not exist: no test function TestNoSuchGuarantee",
		"planted.md:6: a \"not a guarantee\" marker with no reason", "planted.md:8: a guarantee that names no test",
		"planted.md:10: a \"not a guarantee\" marker on a paragraph that states none", "planted.md:12: a \"not a guarantee\" marker with no paragraph after it",
		"planted.md:14: a guarantee held by a test that does not exist: ExamplePlanted in package fence has no output comment"} {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("planted guarantee %q: not reported (reports: %q)", want, errs)
		}
	}
	if len(errs) != 7 || n != 4 {
		t.Errorf("planted guarantees: %d seen, reports %q; want 4 seen and 7 reports", n, errs)
	}
	pending := []*pendingEntry{{doc: "docs/planted.md", quote: "granted twice"}, {doc: "docs/planted.md", quote: "no longer there"}}
	kept := doc{"docs/planted.md", strings.Split(strings.Join([]string{
		"A lease is never granted twice.",
		"",
		"- A stale token is always refused (`quorum.TestForcedViolationTokens`).",
		"- At most one holder: `TestFailoverFenced` (single), `internal/testkit/faults.TestFailoverRace`,",
		"  `TestReplicasHandoffWaits/go-redis`.",
		"",
		"This is never a good idea. <!-- not a guarantee: advice -->",
		"",
		"| never | a header |",
		"|---|---|",
		"| `dlock run` | exits 76 on a lost lease (`TestRunLost` (cmd/dlock)) |",
		"| the fence | refuses a late write (`Example_fencedWrite`, `internal/engine.FuzzStaleCounter`) |",
		"| go-redis's line | a Sentinel refused <!-- not a guarantee: what a line means --> |",
		"<!-- not a guarantee: the command's usage, not a promise -->",
		"Never run it as root.",
		"",
		"Write `<!-- not a guarantee: why -->` before it (`TestDocsGuarantees`); never `<!-- not a guarantee -->`.",
		"",
		"```sh",
		"dlock run -- true",
		"",
		"never: exits 1",
		"```",
	}, "\n"), "\n")}
	errs, n = m.guarantees(kept, pending)
	if len(errs) != 0 || n != 6 || pending[0].used != 1 || pending[1].used != 0 {
		t.Errorf("held guarantees: %d seen, reports %q, pending used %d and %d; want 6 seen, none, 1 and 0", n, errs, pending[0].used, pending[1].used)
	}

	planted := doc{"docs/planted.md", []string{"Extend (`single/lua/extend.lua`):", "", "```lua"}}
	planted.lines = append(append(planted.lines, block...), "```", "", "Unnamed:", "", "```lua", lines[0], "```")
	errs, n = scripts(planted)
	if n != 2 || len(errs) != 2 || !strings.Contains(errs[0], "differs from single/lua/extend.lua") || !strings.Contains(errs[1], "names no script file") {
		t.Errorf("planted scripts: %d blocks, reports %q; want 2, the edited one and the unnamed one", n, errs)
	}
}
