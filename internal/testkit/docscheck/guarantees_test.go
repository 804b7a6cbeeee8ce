package docscheck

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The lists of guarantee paragraphs that name no test yet, "doc: quote" a
// line, the quote a piece of the paragraph's text: pending.txt those
// whose tests are being written on other branches (emptied once they are
// merged and named), untested.txt the promises no test holds yet (a line
// goes when its test is written).
var allowFiles = []string{"testdata/pending.txt", "testdata/untested.txt"}

var (
	// promise is a word that states a guarantee.
	promise = regexp.MustCompile(`(?i)\b(never|always|at most|refused|refuses)\b|\bexits? \d+\b`)
	// marker exempts a paragraph that promises nothing; its reason says why.
	marker  = regexp.MustCompile(`<!--\s*not a guarantee\b\s*(?::([^>]*?))?\s*-->`)
	comment = regexp.MustCompile(`(?s)<!--.*?-->`)
	// heldBy is a test named in a code span, qualified as pkg.TestX,
	// folder.TestX or by a package in parentheses after it: "`TestX`
	// (quorum)"; a subtest or a trailing * may follow the name.
	heldBy   = regexp.MustCompile("`(?:([\\w/]+)\\.)?((?:Test|Fuzz|Example)[A-Z_]\\w*)(?:/[^`\\s]*)?(\\*?)`(?:\\s+\\(([\\w/]+)\\))?")
	listItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s`)
	tableSep = regexp.MustCompile(`^\s*\|[\s:|-]*\|\s*$`)
	number   = regexp.MustCompile("`((?:exits? )?\\d+)`")
)

// unit is a paragraph, a list item or a table row of a doc's prose.
type unit struct {
	line   int    // its first line
	text   string // its lines, joined with spaces
	marked bool   // a "not a guarantee" marker stands before or within it
	reason string // the marker's reason
}

// units splits d's prose, fenced code blocks and headings aside, into
// paragraphs, list items and table rows (a table's header aside). A line
// that holds only a comment ends a unit; a marker on such a line applies
// to the unit that starts on the next line.
func units(d doc) (out []unit, errs []string) {
	var cur *unit
	var pending *unit // a marker waiting for its unit
	end := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	start := func(n int) {
		end()
		cur = &unit{line: n}
		if pending != nil {
			cur.marked, cur.reason = true, pending.reason
			pending = nil
		}
	}
	fenced := false
	for i, l := range d.lines {
		n := i + 1
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			end()
			if pending != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: a \"not a guarantee\" marker with no paragraph after it", d.path, pending.line))
				pending = nil
			}
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		switch {
		case t == "" || strings.HasPrefix(t, "#") || tableSep.MatchString(t):
			end()
			if pending != nil { // a marker stands on the line just before its unit
				errs = append(errs, fmt.Sprintf("%s:%d: a \"not a guarantee\" marker with no paragraph after it", d.path, pending.line))
				pending = nil
			}
			continue
		case strings.HasPrefix(t, "<!--") && strings.HasSuffix(t, "-->") && comment.ReplaceAllString(t, "") == "":
			end()
			if m := markerIn(t); m != nil {
				if pending != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: a \"not a guarantee\" marker with no paragraph after it", d.path, pending.line))
				}
				pending = &unit{line: n, reason: strings.TrimSpace(m[1])}
			}
			continue
		case strings.HasPrefix(t, "|"):
			if i+1 < len(d.lines) && tableSep.MatchString(d.lines[i+1]) {
				end() // a table's header
				continue
			}
			start(n)
			cur.text = t
			if m := markerIn(t); m != nil {
				cur.marked, cur.reason = true, strings.TrimSpace(m[1])
			}
			end()
			continue
		case listItem.MatchString(l) || cur == nil:
			start(n)
		}
		if cur.text != "" {
			cur.text += " "
		}
		cur.text += t
		if m := markerIn(t); m != nil {
			cur.marked, cur.reason = true, strings.TrimSpace(m[1])
		}
	}
	end()
	if pending != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: a \"not a guarantee\" marker with no paragraph after it", d.path, pending.line))
	}
	return out, errs
}

// markerIn finds a marker in a line, outside its code spans (a doc may
// show the marker's form in one).
func markerIn(line string) []string {
	return marker.FindStringSubmatch(codeSpan.ReplaceAllString(line, "x"))
}

// uncommented is text without its comments, its code spans kept whole.
func uncommented(text string) string {
	var b strings.Builder
	last := 0
	for _, m := range codeSpan.FindAllStringIndex(text, -1) {
		b.WriteString(comment.ReplaceAllString(text[last:m[0]], ""))
		b.WriteString(text[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(comment.ReplaceAllString(text[last:], ""))
	return b.String()
}

// promises says whether a unit's text states a guarantee: a promise word
// in its prose, code spans and comments aside (an exit status in a code
// span counts).
func promises(text string) bool {
	text = number.ReplaceAllString(text, "$1")
	text = codeSpan.ReplaceAllString(text, "x")
	text = comment.ReplaceAllString(text, "")
	text = link.ReplaceAllString(text, "]")
	return promise.MatchString(text)
}

// pendingEntry is one line of an allow list.
type pendingEntry struct {
	file  string
	line  int
	doc   string
	quote string
	used  int
}

func readPending(t *testing.T, file string) []*pendingEntry {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*pendingEntry
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		l := strings.TrimSpace(s.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		p, quote, ok := strings.Cut(l, ": ")
		if !ok || strings.TrimSpace(quote) == "" {
			t.Errorf("%s:%d: want \"doc: quote\", got %q", file, n, l)
			continue
		}
		out = append(out, &pendingEntry{file: file, line: n, doc: p, quote: strings.Join(strings.Fields(quote), " ")})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// guarantees checks that every unit of d that states a guarantee names an
// existing test in a code span, or carries a marker with a reason; a unit
// a pending entry quotes is left for its test. It returns what is wrong
// and how many guarantee units it saw.
func (m *module) guarantees(d doc, pending []*pendingEntry) (errs []string, seen int) {
	us, errs := units(d)
	for _, u := range us {
		at := fmt.Sprintf("%s:%d", d.path, u.line)
		if u.marked {
			if u.reason == "" {
				errs = append(errs, fmt.Sprintf("%s: a \"not a guarantee\" marker with no reason (<!-- not a guarantee: why -->)", at))
			} else if !promises(u.text) {
				errs = append(errs, fmt.Sprintf("%s: a \"not a guarantee\" marker on a paragraph that states none: drop the marker", at))
			}
			continue
		}
		if !promises(u.text) {
			continue
		}
		seen++
		held := false
		var missing []string
		for _, ref := range heldBy.FindAllStringSubmatch(uncommented(u.text), -1) {
			qual := ref[1]
			if qual == "" {
				qual = ref[4]
			}
			if msg := m.testIn(qual, ref[2], ref[3] == "*"); msg != "" {
				missing = append(missing, msg)
			} else {
				held = true
			}
		}
		for _, msg := range missing {
			errs = append(errs, fmt.Sprintf("%s: a guarantee held by a test that does not exist: %s", at, msg))
		}
		if held || len(missing) > 0 {
			continue
		}
		text := strings.Join(strings.Fields(u.text), " ")
		left := false
		for _, p := range pending {
			if p.doc == d.path && strings.Contains(text, p.quote) {
				p.used++
				left = true
			}
		}
		if !left {
			errs = append(errs, fmt.Sprintf("%s: a guarantee that names no test in a code span (`TestX`), nor a marker <!-- not a guarantee: why -->: %q", at, excerpt(u.text)))
		}
	}
	return errs, seen
}

// testIn checks a test named with a qualifier: a package's folder, a
// package's name, or something else (then it reads as unqualified). The
// test must be one go test judges: a Test or Fuzz function, or an example
// with an output comment.
func (m *module) testIn(qual, name string, prefix bool) string {
	var dirs []string
	where := "the module"
	switch {
	case m.pkgs[qual] && strings.Contains(qual, "/"):
		dirs, where = []string{qual}, qual
	case m.byName[qual] != nil:
		dirs, where = m.byName[qual], "package "+qual
	default:
		for dir := range m.checked {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		for n := range m.checked[dir] {
			if n == name || prefix && strings.HasPrefix(n, name) {
				return ""
			}
		}
	}
	for _, dir := range dirs {
		if m.tests[dir][name] {
			return fmt.Sprintf("%s in %s has no output comment: go test runs it and checks nothing", name, where)
		}
	}
	return fmt.Sprintf("no test function %s in %s", name, where)
}

// excerpt is the start of a unit's text, for an error.
func excerpt(s string) string {
	if r := []rune(s); len(r) > 100 {
		return string(r[:100]) + "…"
	}
	return s
}

// guaranteeDocs are the docs whose guarantees are checked: README.md and
// docs/*.md (the changelog reports changes, and promises nothing new).
func guaranteeDocs(t *testing.T) []doc {
	var out []doc
	for _, d := range docs(t) {
		if d.path != "CHANGELOG.md" {
			out = append(out, d)
		}
	}
	return out
}

// TestDocsGuarantees fails for every paragraph, list item or table row of
// README.md and docs/*.md that states a guarantee (never, always, at most,
// refused, refuses, exits N) and names no existing test in a code span,
// unless a marker "<!-- not a guarantee: why -->" stands before or within
// it; and for every entry of testdata/pending.txt or testdata/untested.txt
// that no longer quotes exactly one such paragraph.
func TestDocsGuarantees(t *testing.T) {
	m := load(t)
	var pending []*pendingEntry
	for _, f := range allowFiles {
		pending = append(pending, readPending(t, f)...)
	}
	total := 0
	for _, d := range guaranteeDocs(t) {
		errs, n := m.guarantees(d, pending)
		total += n
		for _, e := range errs {
			t.Error(e)
		}
	}
	for _, p := range pending {
		switch {
		case p.used == 0:
			t.Errorf("%s:%d: %s: %q quotes no paragraph that states a guarantee and names no test: drop the line", p.file, p.line, p.doc, p.quote)
		case p.used > 1:
			t.Errorf("%s:%d: %s: %q quotes %d paragraphs: quote one", p.file, p.line, p.doc, p.quote, p.used)
		}
	}
	t.Logf("%d guarantees checked, %d of them on the allow lists", total, len(pending))
	if total < 100 {
		t.Errorf("only %d guarantees found: the docs state far more (the patterns no longer find them?)", total)
	}
}
