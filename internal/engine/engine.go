// Package engine is what the strategies and primitives share on the
// server side: every script they run is registered here, by a name that
// says which package's data model it acts on ("single/claim",
// "quorum/vote+token"), so that one list holds them all for the tests that
// judge them together (their text, the commands an ACL must allow, the
// scripts a test preloads).
//
// Each strategy and primitive keeps what is its own: its Lua (the layout
// of its keys, its scripts' bodies) and the replies it reads.
package engine
