// Package engine is what the strategies and primitives share on the
// server side: the one assembler of their scripts (Spec, Source, Script),
// the Lua library in lua/ (the server's clock read once, tokens, the idle
// expiry of a key's hash, gone owners and the ticket queue: each function
// in the scripts that call it, and only there), and the registry of every script they run, by a name that says which package's
// data model it acts on ("single/claim", "quorum/vote+token+check"), so
// that one list holds them all for the tests that judge them together:
// their text (TestScriptsGolden), the scripts a test preloads.
//
// Each strategy and primitive keeps what is its own: its lua/ (the layout
// of its keys, its scripts' bodies) and the replies it reads.
package engine
