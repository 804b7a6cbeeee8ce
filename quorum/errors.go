package quorum

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// AnswerKind is how one node answered a request.
type AnswerKind uint8

const (
	// KindOK: the node did what was asked (voted, committed, extended,
	// released).
	KindOK AnswerKind = iota
	// KindHeld: the lock is held there by another owner (for extend and
	// release: this owner no longer holds it there).
	KindHeld
	// KindError: the node failed or refused (connection, script error,
	// counter already higher in phase 2, the caller's context ended).
	KindError
	// KindTimeout: no answer within the node timeout; the request may
	// still land later.
	KindTimeout
	// KindSitsOut: the node sits out, its vote not counted: it was
	// restarted, flushed or first used less than the sit-out ago (Err is
	// a *SitOutError saying for how long), or it sat out since and its
	// fence counters are not repaired yet.
	KindSitsOut
	// KindNotAwaited: the outcome was decided before the node answered.
	KindNotAwaited
)

func (k AnswerKind) String() string {
	switch k {
	case KindOK:
		return "ok"
	case KindHeld:
		return "held by other"
	case KindError:
		return "error"
	case KindTimeout:
		return "timeout"
	case KindSitsOut:
		return "sits out"
	case KindNotAwaited:
		return "not awaited"
	default:
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
}

// NodeAnswer is one node's part in a quorum decision.
type NodeAnswer struct {
	Node string // the node's name (its address)
	Kind AnswerKind
	Err  error // set for KindError, KindTimeout and KindSitsOut
}

// Error reports a request that fewer than a majority of the nodes
// granted, or that a majority granted too late (Reason is then
// ErrNoValidity). errors.Is and errors.As see through it to each node's
// error (context errors included) and to Reason. It matches lease.ErrTaken
// when a majority of the nodes hold the lock for another owner, and
// lease.ErrNotHeld when, on extend, release or resume, so many nodes
// answered that they no longer hold the lease that a majority was out of
// reach. Nodes that failed, timed out or were not awaited count for
// neither: a quorum that did not answer is no lease ended.
type Error struct {
	Op     string // "acquire", "commit", "extend", "release", "force release" or "resume"
	Key    string
	Got    int // nodes that granted the request
	Needed int // the quorum
	Nodes  []NodeAnswer
	Reason error // why, beyond the nodes' answers; may be nil

	nodeErrs *multierror.Error
	taken    bool
	notHeld  bool
}

func newError(op, key string, got, needed int, nodes []NodeAnswer, reason error) *Error {
	e := &Error{Op: op, Key: key, Got: got, Needed: needed, Nodes: nodes, Reason: reason}
	held := 0
	for _, a := range nodes {
		if a.Kind == KindHeld {
			held++
		}
		if a.Err != nil {
			e.nodeErrs = multierror.Append(e.nodeErrs, &nodeError{node: a.Node, err: a.Err})
		}
	}
	switch op {
	case "acquire":
		e.taken = held >= needed
	case "extend", "release", "resume":
		e.notHeld = held > len(nodes)-needed
		if e.notHeld && e.Reason == nil {
			e.Reason = lease.ErrNotHeld
		}
	}
	return e
}

// nodeError names the node an error came from.
type nodeError struct {
	node string
	err  error
}

func (e *nodeError) Error() string { return e.node + ": " + e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "quorum: %s %q: %d of %d nodes agreed, %d needed", e.Op, e.Key, e.Got, len(e.Nodes), e.Needed)
	if e.Reason != nil {
		fmt.Fprintf(&b, " (%v)", e.Reason)
	}
	b.WriteString(": ")
	for i, a := range e.Nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Node)
		b.WriteString(" ")
		b.WriteString(a.Kind.String())
		var so *SitOutError
		switch {
		case errors.As(a.Err, &so):
			fmt.Fprintf(&b, " for %v more", so.Left.Round(time.Millisecond))
		case a.Err == errNotRepaired:
			b.WriteString(", not repaired yet")
		case a.Err != nil:
			fmt.Fprintf(&b, " (%v)", a.Err)
		}
	}
	return b.String()
}

// Unwrap returns Reason, then each node's error: errors.As finds the
// quorum's reason before any node's.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.nodeErrs != nil {
		errs = append(errs, e.nodeErrs.WrappedErrors()...)
	}
	return errs
}

// Is reports whether target is lease.ErrTaken for an acquisition refused by
// a majority of holders, or lease.ErrNotHeld for a lost lease.
func (e *Error) Is(target error) bool {
	return (e.taken && target == lease.ErrTaken) || (e.notHeld && target == lease.ErrNotHeld)
}

// SitOutError says why a quorum node's vote does not count, or why too
// few nodes could vote for a quorum: nodes restarted, flushed or first
// used less than the sit-out ago (option.MaxTTL, plus the node timeout and
// the drift margin) may have lost locks they granted, so they wait until
// every such lock has expired. It matches ErrSitsOut.
type SitOutError struct {
	// Nodes is how many nodes sit out: 1 for one node's answer.
	Nodes int
	// Ago is, for one node, the time since its restart, flush or first
	// use, by its own clock.
	Ago time.Duration
	// Left is, for one node, the time until it votes again; for a quorum,
	// the time until enough nodes vote again for a majority, once the
	// nodes that answered still do.
	Left time.Duration
}

// ErrSitsOut matches every *SitOutError.
var ErrSitsOut = errors.New("quorum: nodes sit out after a restart, a flush or their first use")

func (e *SitOutError) Error() string {
	if e.Nodes == 1 && e.Ago > 0 {
		return fmt.Sprintf("quorum: node sits out for %v more: restarted, flushed or first used %v ago, it may have lost locks it granted",
			e.Left.Round(time.Millisecond), e.Ago.Round(time.Millisecond))
	}
	return fmt.Sprintf("quorum: %d nodes sit out after a restart, a flush or their first use; a majority can vote again in %v",
		e.Nodes, e.Left.Round(time.Millisecond))
}

// Is reports whether target is ErrSitsOut.
func (e *SitOutError) Is(target error) bool { return target == ErrSitsOut }

// sitOutReason returns a *SitOutError when nodes that sit out kept the
// quorum from voting: the nodes that answered otherwise were too few for a
// majority. Its Left is the wait until enough of them vote again. It
// returns nil otherwise.
func sitOutReason(votes []vote, q int) error {
	var lefts []time.Duration
	others, unrepaired := 0, 0
	for i := range votes {
		var so *SitOutError
		switch {
		case errors.As(votes[i].answer.Err, &so):
			lefts = append(lefts, so.Left)
		case votes[i].answer.Err == errNotRepaired:
			unrepaired++
		case votes[i].read:
			others++
		}
	}
	switch {
	case others+unrepaired >= q && others < q && len(lefts) == 0:
		return errRepairing
	case len(lefts) == 0 || others+unrepaired >= q:
		return nil
	}
	slices.Sort(lefts)
	need := min(q-others-unrepaired, len(lefts))
	return &SitOutError{Nodes: len(lefts), Left: lefts[need-1]}
}

// refusedCredentials reports whether so many nodes refused the
// credentials (node.ErrAuth) that the others cannot make a majority.
func (e *Error) refusedCredentials() bool {
	refused := 0
	for _, a := range e.Nodes {
		if errors.Is(a.Err, node.ErrAuth) {
			refused++
		}
	}
	return refused > 0 && refused > len(e.Nodes)-e.Needed
}

// Failed returns the names of the nodes that did not grant the request.
func (e *Error) Failed() []string {
	var out []string
	for _, a := range e.Nodes {
		if a.Kind != KindOK {
			out = append(out, a.Node)
		}
	}
	return out
}
