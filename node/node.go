// Package node is one Redis or Valkey endpoint, as the lock strategies see it:
// a place to run Lua scripts, optionally followed by WAIT on the same
// connection, and to hear about releases published on a channel.
//
// A Node is built from a client the caller already has, by the adapter of
// its library: node/goredis for a go-redis redis.UniversalClient
// (standalone, cluster or failover), node/valkeygo for a valkey-go
// valkey.Client, node/rueidis for a rueidis Client, node/redigo for a
// redigo Pool (see docs/clients.md). This package links none of them;
// everything above it is client-agnostic.
package node

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Node is one Redis or Valkey endpoint. Its methods are safe for concurrent use.
type Node interface {
	// Eval runs s with keys and args, by EVALSHA, falling back to EVAL when
	// the server answers NOSCRIPT. A Lua error reply is returned as a
	// *ReplyError; a reply of another shape is returned as a Reply.
	Eval(ctx context.Context, s *Script, keys []string, args ...string) (Reply, error)

	// Pipeline sends calls in order on one connection, in one round trip,
	// and returns one Result per call. The server runs them in that order,
	// save in one case: a call whose script the server lost from its cache
	// (a restart, SCRIPT FLUSH) since the Node last ran it is answered
	// NOSCRIPT, and sent again after the calls behind it ran. When wait.Replicas > 0, a
	// WAIT wait.Replicas wait.Timeout follows on the same connection, so it
	// counts exactly the writes of these calls, and acked is its answer. err
	// is set only when the pipeline as a whole failed (connection lost,
	// context ended); per-call errors are in the results.
	Pipeline(ctx context.Context, calls []Call, wait Wait) (results []Result, acked int, err error)

	// Subscribe delivers on the returned channel each message published on
	// channel, until stop is called. Messages coalesce: a reader that falls
	// behind finds the latest one pending, the earlier ones dropped, and
	// never blocks a publisher.
	// The subscription shares one connection per Node; it is a hint, not a
	// guarantee: a message may be lost when that connection breaks. stop
	// returns at once; the server-side subscription ends in the
	// background, even behind a call to a hung server, and Close waits for
	// that.
	Subscribe(ctx context.Context, channel string) (messages <-chan string, stop func(), err error)

	// String names the endpoint (its address) for errors and logs.
	String() string

	// Close ends what the Node started (its subscription connection and
	// goroutine). It does not close the client the Node was built from.
	Close() error
}

// Call is one script invocation in a Pipeline.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string
}

// Result is the outcome of one Call.
type Result struct {
	Reply Reply
	Err   error
}

// Wait asks for a WAIT after a pipeline; the zero value asks for none.
type Wait struct {
	Replicas int
	Timeout  time.Duration
}

// Script is a Lua script known by its SHA1, so it is sent in full only when a
// server does not have it cached yet.
type Script struct {
	src   string
	sha   string
	first *Script // see NewScriptAfter
}

// NewScript returns the script with source src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// NewScriptAfter returns the script with source src that a server runs
// only once it has run first, successfully, since it started. A call that
// finds src not cached on the server (it started since, or its scripts were
// flushed) runs first instead, with the same keys and arguments, and its
// reply is first's; once first replied without an error, the call loads
// src on the very connection that ran first, so into the same server
// process. Redis and Valkey (7.0 and later) neither persist nor replicate
// their script cache, so a server process runs src only after it ran first
// itself: first can check, once per process, what src may then take for
// granted. A client that cannot hold one connection for both (a Ring)
// runs first at every call. first must not have a first of its own.
func NewScriptAfter(first *Script, src string) *Script {
	s := NewScript(src)
	s.first = first
	return s
}

// Source returns the Lua source.
func (s *Script) Source() string { return s.src }

// SHA returns the hex SHA1 of the source, as EVALSHA wants it.
func (s *Script) SHA() string { return s.sha }

// First returns the script a server runs before s (see NewScriptAfter), or
// nil.
func (s *Script) First() *Script { return s.first }

// Pointers returns pointers to the script's SHA1 and source, for an adapter
// that hands them to its client as command arguments: a pointer fits in an
// interface without the allocation a string costs. They must not be
// written through.
func (s *Script) Pointers() (sha, src *string) { return &s.sha, &s.src }

// ErrClosed is returned by a Node's Subscribe after Close.
var ErrClosed = errors.New("node: closed")

// ErrAuth matches, with errors.Is, a *ReplyError with which the server
// refused the client's credentials or asked for some: the client's
// username or password is wrong, or missing.
var ErrAuth = errors.New("node: authentication failed")

// ErrCrossSlot is returned by Pipeline on a cluster client when a WAIT is
// asked for and the calls' keys are spread so that no single connection can
// carry them all (see each adapter for its client's rule).
var ErrCrossSlot = errors.New("node: pipeline with WAIT spans more than one cluster slot")

// ValueKind tells which of a Value's fields holds its content.
type ValueKind uint8

// The kinds of Value.
const (
	Nil ValueKind = iota
	Int
	Str
)

// Value is one element of a script's reply. Scripts in this module reply
// with flat arrays of integers and strings, so Value needs no nesting.
type Value struct {
	Kind ValueKind
	Int  int64
	Str  string
}

// Reply is a script's reply. A scalar reply is a Reply of one Value.
type Reply []Value

// Int returns the integer at i, or 0 when i is out of range or not an integer.
func (r Reply) Int(i int) int64 {
	if i < 0 || i >= len(r) || r[i].Kind != Int {
		return 0
	}
	return r[i].Int
}

// Str returns the string at i, or "" when i is out of range or not a string.
func (r Reply) Str(i int) string {
	if i < 0 || i >= len(r) || r[i].Kind != Str {
		return ""
	}
	return r[i].Str
}

// ReplyError is an error reply from the server, such as a script's
// redis.error_reply("DLSTALE ...").
type ReplyError struct {
	Msg string
}

func (e *ReplyError) Error() string { return fmt.Sprintf("node: server replied: %s", e.Msg) }

// Is reports whether target is ErrAuth and the server refused the client's
// credentials, or asked for some (WRONGPASS, NOAUTH).
func (e *ReplyError) Is(target error) bool {
	return target == ErrAuth && (strings.HasPrefix(e.Msg, "WRONGPASS") || strings.HasPrefix(e.Msg, "NOAUTH"))
}
