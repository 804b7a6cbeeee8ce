package observe_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
	"github.com/dlockgo/dlock/ratelimit"
	"github.com/dlockgo/dlock/single"
)

// logBuffer is a JSON slog handler's output, safe for the lease's renewal
// goroutine to write to while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (lb *logBuffer) Write(p []byte) (int, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.Write(p)
}

func (lb *logBuffer) String() string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.String()
}

// records parses the buffer, one map per line.
func (lb *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(lb.String()) {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), "log line %q", line)
		out = append(out, r)
	}
	return out
}

func newLog(level slog.Level) (*logBuffer, observe.Observer) {
	lb := &logBuffer{}
	return lb, observe.Log(slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: level})))
}

// summary is one record as "LEVEL msg outcome", the attributes every test
// checks.
func summary(r map[string]any) string {
	s := r["level"].(string) + " " + r["msg"].(string)
	if o, ok := r["outcome"]; ok {
		s += " " + o.(string)
	}
	return s
}

func summaries(rs []map[string]any) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = summary(r)
	}
	return out
}

func TestLogSingle(t *testing.T) {
	srv := redistest.Start(t)
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			lb, obs := newLog(slog.LevelDebug)
			lk, err := single.New(redistest.NodeFor(t, client, srv.Addr()), option.Observer(obs))
			require.NoError(t, err)
			ctx := t.Context()
			key := "log-" + client
			a, err := lk.Acquire(ctx, key)
			require.NoError(t, err)
			if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("TryAcquire of a held lock: %v; want ErrTaken", err)
			}
			require.NoError(t, a.Release(ctx))
			b, err := lk.TryAcquire(ctx, key, option.TTL(50*time.Millisecond))
			require.NoError(t, err)
			<-b.Done()
			// The local clock ends the lease a drift margin early; let
			// the server's end it too.
			time.Sleep(20 * time.Millisecond)
			if err := b.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("Release of an expired lease: %v; want ErrNotHeld", err)
			}

			rs := lb.records(t)
			want := []string{
				"DEBUG dlock acquire started",
				"INFO dlock acquired acquired",
				"DEBUG dlock acquire started",
				"DEBUG dlock not acquired taken",
				"INFO dlock released ok",
				"DEBUG dlock acquire started",
				"INFO dlock acquired acquired",
				"WARN dlock lease lost expired",
			}
			if got := summaries(rs); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, r := range rs {
				if r["key"] != key || r["strategy"] != "single" {
					t.Errorf("record %v: key %v, strategy %v; want %q, single", r, r["key"], r["strategy"], key)
				}
				if _, ok := r["node"]; ok {
					t.Errorf("record %v names a node; only votes do", r)
				}
			}
			if w, ok := rs[1]["wait"].(float64); !ok || w <= 0 {
				t.Errorf("acquired record's wait = %v; want > 0 (ns)", rs[1]["wait"])
			}
			checkNoOwner(t, lb.String(), a, b)
		})
	}
}

// checkNoOwner fails when the log holds an owner value of ls.
func checkNoOwner(t *testing.T, log string, ls ...*lease.Lease) {
	t.Helper()
	for _, l := range ls {
		if strings.Contains(log, l.Owner()) {
			t.Errorf("log holds the owner value %s:\n%s", l.Owner(), log)
		}
	}
}

func TestLogLevels(t *testing.T) {
	srv := redistest.Start(t)
	lb, obs := newLog(slog.LevelInfo)
	lk, err := single.New(redistest.NodeFor(t, "go-redis", srv.Addr()), option.Observer(obs))
	require.NoError(t, err)
	ctx := t.Context()
	l, err := lk.Acquire(ctx, "levels")
	require.NoError(t, err)
	if _, err := lk.TryAcquire(ctx, "levels"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("TryAcquire of a held lock: %v; want ErrTaken", err)
	}
	require.NoError(t, l.Release(ctx))
	got := strings.Join(summaries(lb.records(t)), "\n")
	if want := "INFO dlock acquired acquired\nINFO dlock released ok"; got != want {
		t.Fatalf("records at level Info:\n%s\nwant:\n%s", got, want)
	}
}

// TestLogAcquireError: a server that does not answer is an error, with the
// node named in err.
func TestLogAcquireError(t *testing.T) {
	srv := redistest.Start(t)
	lb, obs := newLog(slog.LevelInfo)
	lk, err := single.New(redistest.NodeFor(t, "go-redis", srv.Addr()), option.Observer(obs))
	require.NoError(t, err)
	srv.Kill()
	if _, err := lk.TryAcquire(t.Context(), "down"); err == nil || errors.Is(err, lease.ErrTaken) {
		t.Fatalf("TryAcquire on a dead server: %v; want a connection error", err)
	}
	rs := lb.records(t)
	if len(rs) != 1 || summary(rs[0]) != "ERROR dlock acquire failed error" {
		t.Fatalf("records: %v; want one ERROR dlock acquire failed error", summaries(rs))
	}
	if e, _ := rs[0]["err"].(string); !strings.Contains(e, srv.Addr()) {
		t.Errorf("err = %q; want it to name the server %s", e, srv.Addr())
	}
}

// TestLogLostToStale: a renewal refused because another owner claimed the
// key since logs the loss and the failed renewal, without the tokens the
// refusal quotes.
func TestLogLostToStale(t *testing.T) {
	srv := redistest.Start(t)
	lb, obs := newLog(slog.LevelWarn)
	lk, err := single.New(redistest.NodeFor(t, "go-redis", srv.Addr()), option.Observer(obs))
	require.NoError(t, err)
	ctx := t.Context()
	a, err := lk.Acquire(ctx, "stale", option.TTL(300*time.Millisecond), option.AutoRenew(true))
	require.NoError(t, err)
	// Take the lock away from a behind its back: the next claim bumps the
	// fence counter past a's token.
	_, err = srv.Do(redistest.FreeArgs("dlock:{stale}")...)
	require.NoError(t, err)
	b, err := lk.TryAcquire(ctx, "stale")
	require.NoError(t, err)
	defer b.Release(ctx)
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease a still alive 5s after its lock was taken")
	}
	if err := a.Err(); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("a ended with %v; want ErrLost", err)
	}
	// The renewal goroutine logs the failed renewal after the loss.
	deadline := time.Now().Add(5 * time.Second)
	for len(lb.records(t)) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	rs := lb.records(t)
	got := strings.Join(summaries(rs), "\n")
	if want := "WARN dlock lease lost lost\nWARN dlock renewal failed failed"; got != want {
		t.Fatalf("records:\n%s\nwant:\n%s", got, want)
	}
	e, _ := rs[1]["err"].(string)
	if !strings.Contains(e, `stale fencing token for "stale"`) {
		t.Errorf("renewal err = %q; want it to say the token is stale", e)
	}
	for _, tok := range []string{a.Token().String(), b.Token().String()} {
		if strings.Contains(e, "got "+tok) || strings.Contains(e, "seen "+tok) {
			t.Errorf("renewal err = %q quotes a token", e)
		}
	}
	checkNoOwner(t, lb.String(), a, b)
}

// TestLogQuorum: votes are logged at Debug with the node that cast them.
func TestLogQuorum(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	nodes := make([]node.Node, len(srvs))
	names := map[string]bool{}
	for i, s := range srvs {
		nodes[i] = redistest.NodeFor(t, "valkey-go", s.Addr())
		names[s.Addr()] = true
	}
	lb, obs := newLog(slog.LevelDebug)
	lk, err := quorum.New(nodes, option.DurableNodes(true), option.Observer(obs))
	require.NoError(t, err)
	defer lk.Close()
	ctx := t.Context()
	l, err := lk.Acquire(ctx, "quorum")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	rs := lb.records(t)
	var votes, other []string
	for _, r := range rs {
		if r["key"] != "quorum" || r["strategy"] != "quorum" {
			t.Errorf("record %v: key %v, strategy %v; want quorum, quorum", r, r["key"], r["strategy"])
		}
		if r["msg"] != "dlock vote" {
			other = append(other, summary(r))
			continue
		}
		votes = append(votes, summary(r))
		if n, _ := r["node"].(string); !names[n] {
			t.Errorf("vote record %v: node %q is none of the servers %v", r, n, names)
		}
		if w, ok := r["wait"].(float64); !ok || w <= 0 {
			t.Errorf("vote record %v: wait = %v; want > 0 (ns)", r, r["wait"])
		}
	}
	if len(votes) < 2 || len(votes) > 3 {
		t.Errorf("%d votes logged; want 2 (a quorum) or 3", len(votes))
	}
	for _, v := range votes {
		if v != "DEBUG dlock vote ok" {
			t.Errorf("vote %q; want DEBUG dlock vote ok", v)
		}
	}
	got := strings.Join(other, "\n")
	if want := "DEBUG dlock acquire started\nINFO dlock acquired acquired\nINFO dlock released ok"; got != want {
		t.Errorf("records other than votes:\n%s\nwant:\n%s", got, want)
	}
	checkNoOwner(t, lb.String(), l)
}

// TestLogForceRelease: an operator's break is a warning, on the Locker
// that broke the lock, and its failure too.
func TestLogForceRelease(t *testing.T) {
	srv := redistest.Start(t)
	lb, obs := newLog(slog.LevelInfo)
	n := redistest.NodeFor(t, "go-redis", srv.Addr())
	holder, err := single.New(n)
	require.NoError(t, err)
	op, err := single.New(n, option.Observer(obs))
	require.NoError(t, err)
	ctx := t.Context()
	l, err := holder.Acquire(ctx, "broken")
	require.NoError(t, err)
	br, err := op.ForceRelease(ctx, "broken")
	require.NoError(t, err)
	if !br.Held || br.Token <= l.Token() {
		t.Fatalf("Broken = %+v; want held, a token above %v", br, l.Token())
	}
	srv.Kill()
	if _, err := op.ForceRelease(ctx, "broken"); err == nil {
		t.Fatal("ForceRelease on a stopped server succeeded")
	}
	rs := lb.records(t)
	got := strings.Join(summaries(rs), "\n")
	if want := "WARN dlock force released ok\nWARN dlock force release failed failed"; got != want {
		t.Fatalf("records:\n%s\nwant:\n%s", got, want)
	}
	if rs[0]["key"] != "broken" || rs[0]["strategy"] != "single" {
		t.Fatalf("record %v; want key broken, strategy single", rs[0])
	}
}

// TestLogRateLimit: a rate limit's answers are debug records, one per
// call with its wait; a call the server could not decide is an error.
func TestLogRateLimit(t *testing.T) {
	srv := redistest.Start(t)
	n := redistest.NodeFor(t, "valkey-go", srv.Addr())
	ctx := t.Context()
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		lb, obs := newLog(level)
		lim, err := ratelimit.New([]node.Node{n}, ratelimit.Limit{Rate: 1, Per: time.Hour}, option.Observer(obs))
		require.NoError(t, err)
		key := "rate-" + level.String()
		for range 2 {
			_, err := lim.Allow(ctx, key)
			require.NoError(t, err)
		}
		if level == slog.LevelInfo {
			srv.Kill()
			_, err = lim.Allow(ctx, key)
			require.Error(t, err, "Allow on a stopped server")
		}
		require.NoError(t, lim.Close())
		rs := lb.records(t)
		want := "DEBUG dlock rate allowed allowed\nDEBUG dlock rate refused refused"
		if level == slog.LevelInfo {
			want = "ERROR dlock rate limit failed error"
		}
		if got := strings.Join(summaries(rs), "\n"); got != want {
			t.Fatalf("at %v, records:\n%s\nwant:\n%s", level, got, want)
		}
		for _, r := range rs {
			if r["key"] != key || r["strategy"] != "ratelimit" || r["wait"] == nil {
				t.Fatalf("record %v; want key %s, strategy ratelimit, a wait", r, key)
			}
		}
	}
}
