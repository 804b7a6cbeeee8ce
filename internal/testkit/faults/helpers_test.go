package faults

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/single"
)

const (
	goRedis  = "go-redis"
	valkeyGo = "valkey-go"
)

// nodeTimeout replaces the quorum's 50ms default: servers started by parallel
// tests under the race detector answer a first call on a new connection
// slower than that.
const nodeTimeout = 250 * time.Millisecond

// forEachClient runs f once per client library, in parallel subtests.
func forEachClient(t *testing.T, f func(t *testing.T, client string)) {
	for _, c := range redistest.Clients {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			f(t, c)
		})
	}
}

func nodesOn(t *testing.T, client string, addrs ...string) []node.Node {
	t.Helper()
	out := make([]node.Node, len(addrs))
	for i, a := range addrs {
		out[i] = redistest.NodeFor(t, client, a)
	}
	return out
}

func addrs(srvs []*redistest.Server) []string {
	out := make([]string, len(srvs))
	for i, s := range srvs {
		out[i] = s.Addr()
	}
	return out
}

func newSingle(t *testing.T, n node.Node, opts ...option.Option) *single.Locker {
	t.Helper()
	lk, err := single.New(n, opts...)
	require.NoError(t, err, "single.New")
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

func newQuorum(t *testing.T, nodes []node.Node, opts ...option.Option) *quorum.Locker {
	t.Helper()
	lk, err := quorum.New(nodes, append([]option.Option{option.NodeTimeout(nodeTimeout)}, opts...)...)
	require.NoError(t, err, "quorum.New")
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// locker is what the scenarios need of either strategy.
type locker interface {
	TryAcquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
}

func do(t *testing.T, s *redistest.Server, args ...string) string {
	t.Helper()
	out, err := s.Do(args...)
	if err != nil && err.Error() != "redis: nil" {
		t.Fatalf("%s %v: %v", s.Addr(), args, err)
	}
	return out
}

// lockField reads a field (owner, attempts) of single's lock on "k", in
// either of its forms (redistest.Server.LockField).
func lockField(t *testing.T, s *redistest.Server, f string) string {
	t.Helper()
	out, err := s.LockField("dlock:{k}", f)
	if err != nil {
		t.Fatalf("%s lock field %s: %v", s.Addr(), f, err)
	}
	return out
}

// resource is the protected resource of a scenario, twice: fenced (it
// refuses a write whose token is below the highest it has seen) and
// unfenced (it accepts every write). Every grant and write goes to both,
// so one run measures what a fence saves.
type resource struct {
	fenced, unfenced *safety.Resource
}

func newResource() *resource {
	return &resource{fenced: safety.NewResource("res"), unfenced: safety.NewResource("res", safety.Unfenced())}
}

func (r *resource) granted(l *lease.Lease) {
	r.fenced.Granted(l)
	r.unfenced.Granted(l)
}

func (r *resource) released(l *lease.Lease) {
	r.fenced.Released(l)
	r.unfenced.Released(l)
}

// write writes value under l to both resources, and returns the fenced
// one's error. A lease without a token is never fenced: a fence refuses
// token 0, so the fenced resource is left out rather than counted as a
// refusal.
func (r *resource) write(l *lease.Lease, value string) error {
	ctx := context.Background()
	_ = r.unfenced.Write(ctx, l, value)
	if !l.Fenced() {
		return nil
	}
	return r.fenced.Write(ctx, l, value)
}

// fill sets the safety counts of row from what r recorded. Fenced counts
// stay nil when no lease carried a token.
func (r *resource) fill(t *testing.T, row *Row) {
	t.Helper()
	f, u := r.fenced.Check(), r.unfenced.Check()
	t.Logf("fenced:   %v", f)
	t.Logf("unfenced: %v", u)
	row.Holders = Int(u.Holders)
	row.Overlaps = Int(u.Overlaps)
	row.UnfencedDoubleWrites = Int(u.UnfencedDoubleWrites)
	if f.Writes > 0 {
		row.StaleAccepted = Int(max(f.StaleAccepted, supersededAccepted(r.fenced.History())))
		row.FencedRefused = Int(f.FencedRefused)
		if !f.Linearizable {
			t.Errorf("fenced register not linearizable: %v", f)
		}
	}
}

// supersededAccepted counts the fenced writes accepted from a holder after
// another holder had been granted the lock later than it: the stale writes
// a fence should refuse, whatever their tokens. safety.Check counts only
// writes whose token is below one accepted earlier, so it misses a stale
// holder whose token equals the newer holder's, or exceeds it.
func supersededAccepted(h safety.History) int {
	first := map[string]time.Time{}
	for _, g := range h.Grants {
		if at, ok := first[g.Holder]; !ok || g.At.Before(at) {
			first[g.Holder] = g.At
		}
	}
	n := 0
	for _, op := range h.Ops {
		if op.Kind != safety.Write || !op.Fenced || op.Outcome != safety.Accepted {
			continue
		}
		own := first[op.Holder]
		for holder, at := range first {
			if holder != op.Holder && at.After(own) && at.Before(op.Call) {
				n++
				break
			}
		}
	}
	return n
}

// attempts runs n single attempts at key, each released at once when it
// succeeds, and returns how many succeeded, the median time of those
// that failed (nil when none failed) and the longest of them, ms (0 when
// none failed).
func attempts(t *testing.T, lk locker, res *resource, key string, n int) (ok int, ttf *float64, slowest float64, errs []error) {
	t.Helper()
	var failed, took []float64
	defer func() {
		if len(took) > 0 {
			slices.Sort(took)
			t.Logf("%d granted, median %.1fms", len(took), took[len(took)/2])
		}
	}()
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		l, err := lk.TryAcquire(ctx, key)
		d := time.Since(start)
		if err != nil {
			failed = append(failed, float64(d.Microseconds())/1000)
			errs = append(errs, err)
			cancel()
			continue
		}
		ok++
		took = append(took, float64(d.Microseconds())/1000)
		res.granted(l)
		_ = res.write(l, key+"-"+strconv.Itoa(i))
		res.released(l)
		_ = l.Release(ctx)
		cancel()
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		ttf = Ms(failed[len(failed)/2])
		slowest = failed[len(failed)-1]
	}
	return ok, ttf, slowest, errs
}

// lockLeft reports whether a quorum lock key for key exists on s.
func lockLeft(t *testing.T, s *redistest.Server, key string) bool {
	t.Helper()
	return do(t, s, "EXISTS", "dlock:{"+key+"}:lock") == "1"
}

// scriptCalls is the number of EVAL and EVALSHA calls s has run.
func scriptCalls(t *testing.T, s *redistest.Server) int {
	t.Helper()
	n, _, err := s.ScriptStats()
	require.NoError(t, err, "%s", s.Addr())
	return n
}

// errKinds counts errors by a short name of their cause.
func errKinds(errs []error) string {
	counts := map[string]int{}
	for _, err := range errs {
		counts[errKind(err)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "×" + strconv.Itoa(counts[k])
	}
	return strings.Join(parts, ", ")
}

func errKind(err error) string {
	var qe *quorum.Error
	switch {
	case errors.Is(err, quorum.ErrNoValidity):
		return "no validity left"
	case errors.Is(err, lease.ErrExpired):
		return "granted too late (released)"
	case errors.Is(err, lease.ErrTaken):
		return "taken"
	case errors.Is(err, single.ErrReplicas):
		return "too few replicas"
	case errors.As(err, &qe):
		timeouts, lost := 0, 0
		for _, a := range qe.Nodes {
			timeouts += b2i(a.Kind == quorum.KindTimeout)
			lost += b2i(a.Kind == quorum.KindSitsOut)
		}
		switch {
		case lost > 0:
			return "quorum: nodes sitting out after data loss"
		case timeouts > 0:
			return "quorum: node timeouts"
		}
		return "quorum: " + strconv.Itoa(qe.Got) + "/" + strconv.Itoa(qe.Needed) + " votes"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
