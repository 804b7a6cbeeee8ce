package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
)

// Result is a limit's answer to one call.
type Result struct {
	// Allowed reports whether the request was admitted.
	Allowed bool
	// Remaining is how many more requests of 1 the limit would admit now,
	// after this call.
	Remaining int
	// RetryAfter is how long until the same request would be admitted,
	// if nothing else is admitted meanwhile: zero when Allowed. On a
	// quorum it is the time a majority of the nodes that answered would
	// admit it.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is full again (Burst
	// remaining), if nothing else is admitted meanwhile.
	ResetAfter time.Duration
}

// answer is one node's reply, or its failure.
type answer struct {
	admitted         bool
	remaining        int64
	retryUs, resetUs int64
	written          string // an admission's id, for its refund
	err              error
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN asks the limit on key to admit n requests at once, and answers
// at once: admitted or not, how many remain, when to retry. n must be
// between 1 and the Burst: a larger n could never be admitted, and is an
// *lease.ArgError. An error other than a bad argument means the servers
// could not decide (on a quorum, ErrNoQuorum when too many nodes failed);
// the request is then not admitted, though some nodes may have counted it.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (Result, error) {
	if l.observer == nil {
		return l.allowN(ctx, key, n)
	}
	start := time.Now()
	r, err := l.allowN(ctx, key, n)
	l.report(key, start, r, err)
	return r, err
}

// report tells the Observer how a call that began at start ended.
func (l *Limiter) report(key string, start time.Time, r Result, err error) {
	l.observer.Observe(observe.Event{Kind: observe.RateDecided, Strategy: "ratelimit", Key: key,
		Outcome: observe.RateOutcome(r.Allowed, err), Wait: time.Since(start), Err: err})
}

// allowN is AllowN, unreported.
func (l *Limiter) allowN(ctx context.Context, key string, n int) (Result, error) {
	if err := l.check(ctx, key, n); err != nil {
		return Result{}, err
	}
	if err := l.begin(); err != nil {
		return Result{}, err
	}
	keys := keysOf(key)
	nArg := strconv.Itoa(n)
	if len(l.nodes) == 1 {
		defer l.calls.Done()
		c, cancel := ctx, context.CancelFunc(func() {})
		if l.timeout > 0 {
			c, cancel = context.WithTimeout(ctx, l.timeout)
		}
		a := l.ask(c, l.nodes[0], keys, nArg)
		cancel()
		if a.err != nil {
			// A node timeout of the Limiter's own is the node's
			// failure: the error matches a context's end only when
			// the caller's context ended.
			return Result{}, ctxerr.Wrap(ctx, ctxerr.Detach(a.err))
		}
		return a.result(), nil
	}
	return l.quorum(ctx, keys, n, nArg)
}

// quorum asks every node at once and decides as soon as a majority
// admitted, or enough refused or failed that no majority can. The calls
// still running then go on, and end within twice the node timeout (Close
// waits for them): each node that answered otherwise than the decision is
// refunded (refund.lua) or charged (charge.lua), so that the nodes count
// the same admissions.
func (l *Limiter) quorum(ctx context.Context, keys []string, n int, nArg string) (Result, error) {
	count := len(l.nodes)
	answers := make(chan answer, count)
	// The nodes' calls are the Limiter's, not the caller's: a caller
	// that gives up does not cut short the calls that keep the nodes
	// alike.
	base := context.WithoutCancel(ctx)
	d := &decision{done: make(chan struct{})}
	var left atomic.Int32
	left.Store(int32(count))
	cost := strconv.FormatInt(int64(n)*l.interval, 10)
	for _, nd := range l.nodes {
		go func() {
			defer func() {
				if left.Add(-1) == 0 {
					l.calls.Done()
				}
			}()
			c, cancel := context.WithTimeout(base, l.timeout)
			a := l.ask(c, nd, keys, nArg)
			cancel()
			answers <- a
			if a.err != nil {
				return
			}
			<-d.done
			if a.admitted != d.admitted {
				c, cancel := context.WithTimeout(base, l.timeout)
				if a.admitted {
					r, err := nd.Eval(c, refundScript, keys, a.written, l.args[2])
					if err == nil && r.Int(0) == 1 {
						l.refunded.Add(1)
					} else {
						l.unrefunded.Add(1)
					}
				} else if _, err := nd.Eval(c, chargeScript, keys, cost, l.args[1], l.args[2]); err == nil {
					l.charged.Add(1)
				}
				cancel()
			}
		}()
	}
	got := make([]answer, 0, count)
	admitted, refused, failed := 0, 0, 0
	var firstErr error
	for admitted < l.majority && refused+failed <= count-l.majority {
		select {
		case a := <-answers:
			got = append(got, a)
			switch {
			case a.err != nil:
				failed++
				if firstErr == nil {
					firstErr = a.err
				}
			case a.admitted:
				admitted++
			default:
				refused++
			}
		case <-ctx.Done():
			d.decide(false)
			return Result{}, fmt.Errorf("ratelimit: %w", ctx.Err())
		}
	}
	d.decide(admitted >= l.majority)
	if !d.admitted && failed > count-l.majority {
		// The nodes' calls are bounded by the node timeout, not by
		// ctx: a node that timed out failed, and the error matches a
		// context's end only when the caller's context ended.
		return Result{}, ctxerr.Wrap(ctx, fmt.Errorf("%w: %d of %d nodes failed, the first with: %w",
			ErrNoQuorum, failed, count, ctxerr.Detach(firstErr)))
	}
	return l.sum(got, d.admitted), nil
}

// decision is a quorum call's outcome, for its nodes' calls: those that
// answered wait for it, and bring their node in line with it.
type decision struct {
	admitted bool
	done     chan struct{}
}

func (d *decision) decide(admitted bool) {
	d.admitted = admitted
	close(d.done)
}

// sum sums up the answers of a quorum call: Remaining is the
// majority-th largest (a node that did not answer has none left),
// RetryAfter and ResetAfter the majority-th smallest among the nodes that
// answered, or their largest when fewer answered.
func (l *Limiter) sum(got []answer, admitted bool) Result {
	var rem, retry, reset []int64
	for _, a := range got {
		if a.err == nil {
			rem = append(rem, a.remaining)
			retry = append(retry, a.retryUs)
			reset = append(reset, a.resetUs)
		}
	}
	r := Result{Allowed: admitted}
	m := l.majority
	slices.Sort(rem)
	if len(rem) >= m {
		r.Remaining = int(rem[len(rem)-m])
	}
	if !admitted {
		r.RetryAfter = us(smallest(retry, m))
	}
	r.ResetAfter = us(smallest(reset, m))
	return r
}

// smallest returns the m-th smallest of v, or its largest when v holds
// fewer than m values (0 for none).
func smallest(v []int64, m int) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[min(m, len(v))-1]
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// ask runs the script on one node.
func (l *Limiter) ask(ctx context.Context, nd node.Node, keys []string, nArg string) answer {
	r, err := nd.Eval(ctx, gcraScript, keys, l.args[0], l.args[1], nArg, l.args[2])
	if err != nil {
		return answer{err: fmt.Errorf("ratelimit: %s: %w", nd, err)}
	}
	a, err := parseReply(r, l.limit.Burst)
	if err != nil {
		return answer{err: fmt.Errorf("ratelimit: %s: %w", nd, err)}
	}
	return a
}

// maxUs is the most µs a reply's times can be: MaxRefill, the longest
// any Limit (of any Limiter on the key) can push TAT ahead.
const maxUs = int64(MaxRefill / time.Microsecond)

// parseReply reads gcra.lua's reply, or returns an error matching
// engine.ErrBadReply when it is of another shape: {1, left, 0, µs until
// full, its id ("T.SEQ", two decimal integers)} for an admission, {0, left,
// µs until retry (> 0), µs until full} for a refusal, left from 0 to
// burst and the times at most MaxRefill. A reply of any other shape is
// never an admission.
func parseReply(r node.Reply, burst int) (answer, error) {
	adm, err := engine.ReplyInt(r, 0, 0, 1)
	if err != nil {
		return answer{}, err
	}
	want := 4 + int(adm)
	if err := engine.ReplyLen(r, want); err != nil {
		return answer{}, err
	}
	a := answer{admitted: adm == 1}
	if a.remaining, err = engine.ReplyInt(r, 1, 0, int64(burst)); err != nil {
		return answer{}, err
	}
	lo, hi := int64(1), maxUs // a refusal's retry is after now
	if a.admitted {
		lo, hi = 0, 0
	}
	if a.retryUs, err = engine.ReplyInt(r, 2, lo, hi); err != nil {
		return answer{}, err
	}
	if a.resetUs, err = engine.ReplyInt(r, 3, 0, maxUs); err != nil {
		return answer{}, err
	}
	if a.admitted {
		a.written = r.Str(4)
		if !validID(a.written) {
			return answer{}, fmt.Errorf("%w: value 4 of 5 is not an admission's id", engine.ErrBadReply)
		}
	}
	return a, nil
}

// validID reports whether id is an admission's id, "T.SEQ": two decimal
// integers.
func validID(id string) bool {
	t, seq, ok := strings.Cut(id, ".")
	_, err1 := strconv.ParseUint(t, 10, 63)
	_, err2 := strconv.ParseUint(seq, 10, 63)
	return ok && err1 == nil && err2 == nil
}

func (a answer) result() Result {
	return Result{Allowed: a.admitted, Remaining: int(a.remaining), RetryAfter: us(a.retryUs), ResetAfter: us(a.resetUs)}
}

// check checks a call's arguments.
func (l *Limiter) check(ctx context.Context, key string, n int) error {
	if err := engine.CheckCall(ctx, key); err != nil {
		return err
	}
	if n < 1 || n > l.limit.Burst {
		return &lease.ArgError{Arg: "n", Value: n,
			Rule: "must be between 1 and the burst, " + strconv.Itoa(l.limit.Burst) + ": a larger n is never admitted"}
	}
	return nil
}

// begin counts a call, so that Close waits for it.
func (l *Limiter) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.calls.Add(1)
	return nil
}

// Wait is WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) (Result, error) {
	return l.WaitN(ctx, key, 1)
}

// WaitN waits until the limit on key admits n requests, sleeping between
// attempts for as long as each refusal's RetryAfter says, and returns the
// admitting call's Result. It returns early, with an error matching
// context.DeadlineExceeded, when ctx's deadline comes before the next
// attempt could be admitted, and with ctx's error when ctx ends; an error
// of a call (see AllowN) ends the wait too.
func (l *Limiter) WaitN(ctx context.Context, key string, n int) (Result, error) {
	if l.observer == nil {
		return l.waitN(ctx, key, n)
	}
	start := time.Now()
	r, err := l.waitN(ctx, key, n)
	l.report(key, start, r, err)
	return r, err
}

// waitN is WaitN, unreported.
func (l *Limiter) waitN(ctx context.Context, key string, n int) (Result, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r, err := l.allowN(ctx, key, n)
		if err != nil || r.Allowed {
			return r, err
		}
		d := max(r.RetryAfter, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return r, fmt.Errorf("ratelimit: %s until admitted, past the deadline: %w", d, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("ratelimit: %w", ctx.Err())
		case <-timer.C:
		}
	}
}
