// Package docscheck holds the tests that keep the prose true to the code.
// TestDocsNames and TestDocsScripts read README.md, CONTRIBUTING.md, docs/*.md (not
// docs/results/, which its runs write) and CHANGELOG.md's Unreleased
// section, and fail when they name a test, example, benchmark or fuzz
// target, a file, a package or an exported identifier the repository does
// not have (the changelog may name identifiers it removed), or print a Lua
// script that differs from the file they name for it. TestDocsLayout
// fails for a package the Layout of CONTRIBUTING.md leaves out. Figures are not
// checked: a doc that cites one names the results file it comes from.
// TestDocsGuarantees holds README.md's and docs/*.md's promises to their
// tests (below). TestDocsCheckCatches plants each kind of error and wants
// it reported.
//
// What counts as a name, so that a doc can be written to be checked:
//
//   - anywhere outside fenced code blocks, a word Test…, Benchmark…,
//     Example… or Fuzz… (a capital or an underscore after the prefix),
//     alone or as pkg.TestX (the package's last path element, dlock for
//     the root) or TestX/subtest: a function of that name in the module's
//     _test.go files (of that package when qualified);
//   - a code span or a link target that is a path (a slash, or a file
//     extension the repository uses): a file or folder, from the
//     repository's root or the doc's folder; a bare file name: a file of
//     that name somewhere in the repository; ../shared/… is the
//     workplace's, beside the repository, and not checked;
//   - a code span github.com/dlockgo/dlock/…: a package of the module;
//   - a code span pkg.Name or pkg.Type.Name, with pkg a package of the
//     module: an exported function, type, variable or constant of it, or
//     a method or field of that type;
//   - a ```lua block: the .lua file named in a code span or link of the
//     three lines before it must hold the block's lines, in order and
//     together (blank and comment-only lines aside); a line "..." in the
//     block skips lines of the file.
//
// What counts as a guarantee, and what holds it: a paragraph, list item
// or table row of README.md or docs/*.md (a table's header, headings and
// fenced code blocks aside) whose prose, outside code spans and comments,
// says "never", "always", "at most", "refused", "refuses", or "exits N" /
// "exit N" (N a number, in a code span or not) must name, in a code span,
// a test go test judges: `TestX`, `FuzzX`, or an `ExampleX` with an output
// comment, qualified as above (`quorum.TestX`,
// `internal/testkit/faults.TestX`) or by a package after it, "`TestX`
// (quorum)"; a subtest or a trailing * may follow the name. A name that
// does not exist is an error, beside the others. A paragraph that promises
// nothing ("this is never a good idea") carries a marker,
// <!-- not a guarantee: why -->, inside it or on the line just before it,
// with a reason; a marker with no reason, on a paragraph with no promise
// word, or with no paragraph after it, is an error. Two lists in testdata/
// hold the promises that name no test yet, one "doc: quote" a line:
// pending.txt those whose tests are being written on other branches,
// emptied once those are merged, and untested.txt those no test holds, a
// list of tests to write. An entry that quotes no such paragraph, or more
// than one, is an error, so neither list outlives its reason.
package docscheck
