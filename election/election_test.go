package election_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

func TestNewArgs(t *testing.T) {
	srv := redistest.Start(t)
	lk := (&env{strategy: strategySingle, client: "go-redis", srvs: []*redistest.Server{srv}}).locker(t, lockerConf{})
	for _, tc := range []struct {
		name   string
		locker election.Locker
		office string
		opts   []option.Option
		arg    string
	}{
		{"nil locker", nil, "o", nil, "locker"},
		{"empty name", lk, "", nil, "name"},
		{"negative TTL", lk, "o", []option.Option{option.TTL(-time.Second)}, "TTL"},
		{"bad retry", lk, "o", []option.Option{option.Retry(time.Second, time.Millisecond)}, "Retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := election.New(tc.locker, tc.office, tc.opts...)
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != tc.arg {
				t.Fatalf("New: %v; want an *lease.ArgError on %s", err, tc.arg)
			}
		})
	}
	el := newElection(t, lk, "args")
	if got, want := el.Key(), election.KeyPrefix+"args"; got != want {
		t.Errorf("Key() = %q; want %q", got, want)
	}
	var nilCtx context.Context // what the test is about; a literal nil would draw a lint
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		err  error
		arg  string
	}{
		{"Campaign nil ctx", func() error { _, err := el.Campaign(nilCtx, "v"); return err }(), "ctx"},
		{"Campaign empty value", func() error { _, err := el.Campaign(ctx, ""); return err }(), "value"},
		{"Campaign long value", func() error { _, err := el.Campaign(ctx, strings.Repeat("v", lease.MaxMetadata+1)); return err }(), "value"},
		{"Leader nil ctx", func() error { _, err := el.Leader(nilCtx); return err }(), "ctx"},
		{"Observe nil ctx", func() error { _, err := el.Observe(nilCtx); return err }(), "ctx"},
	} {
		var ae *lease.ArgError
		if !errors.As(tc.err, &ae) || ae.Arg != tc.arg {
			t.Errorf("%s: %v; want an *lease.ArgError on %s", tc.name, tc.err, tc.arg)
		}
	}
	// A value of the largest size is a campaign like any.
	term := campaign(t, el, strings.Repeat("v", lease.MaxMetadata))
	require.NoError(t, term.Resign(ctx))
	keys, err := srv.Keys()
	require.NoError(t, err)
	for _, k := range keys {
		if !strings.Contains(k, el.Key()) {
			t.Errorf("key %q left by the bad arguments; want only the office's", k)
		}
	}
}

// TestCampaign: one leader at a time, known to Leader with its value and
// token; a campaign that gives up leaves nothing; Resign ends the term and
// vacates the office; the next term's token is larger.
func TestCampaign(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("campaign")
		a := newElection(t, e.locker(t, lockerConf{}), name)
		b := newElection(t, e.locker(t, lockerConf{}), name)

		if _, err := a.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
			t.Fatalf("Leader of a new office: %v; want ErrNoLeader", err)
		}
		ta := campaign(t, a, "host-a:8080")
		if ta.Value() != "host-a:8080" || ta.Token() == 0 || ta.TTL() <= 0 || ta.Err() != nil {
			t.Fatalf("term: value %q token %d TTL %v err %v; want host-a:8080, a token, time left, no error",
				ta.Value(), ta.Token(), ta.TTL(), ta.Err())
		}
		for _, el := range []*election.Election{a, b} {
			l, err := el.Leader(ctx)
			require.NoError(t, err, "Leader")
			if l.Value != ta.Value() || l.Token != ta.Token() || l.TTL <= 0 {
				t.Fatalf("Leader = %+v; want %q with token %d and time left", l, ta.Value(), ta.Token())
			}
		}
		info, err := e.locker(t, lockerConf{}).Inspect(ctx, a.Key())
		require.NoError(t, err)
		if !info.Held || info.Metadata != "host-a:8080" {
			t.Fatalf("Inspect(%q): held %v, metadata %q; want held with the value", a.Key(), info.Held, info.Metadata)
		}

		// A rival gives up while the office is held.
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = b.Campaign(cctx, "host-b:8080")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("rival's campaign: %v; want DeadlineExceeded", err)
		}

		termCtx := ta.Context(ctx)
		require.NoError(t, ta.Resign(ctx), "Resign")
		select {
		case <-ta.Done():
		default:
			t.Fatal("Done still open after Resign")
		}
		if !errors.Is(ta.Err(), lease.ErrReleased) || !errors.Is(context.Cause(termCtx), lease.ErrReleased) {
			t.Fatalf("after Resign: Err %v, context cause %v; want ErrReleased", ta.Err(), context.Cause(termCtx))
		}
		if err := ta.Resign(ctx); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("second Resign: %v; want ErrNotHeld", err)
		}
		// The rival that gave up was not elected behind its back.
		if _, err := a.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
			t.Fatalf("Leader after Resign: %v; want ErrNoLeader", err)
		}

		tb := campaign(t, b, "host-b:8080")
		if tb.Token() <= ta.Token() {
			t.Fatalf("next term's token %d; want above %d", tb.Token(), ta.Token())
		}
		require.NoError(t, tb.Resign(ctx))
	})
}

// TestSuccession: candidates waiting on a held office are elected one
// after another as each leader resigns, in the order they campaigned, each
// with a larger token.
func TestSuccession(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		name := e.office("succession")
		first := campaign(t, newElection(t, e.locker(t, lockerConf{}), name), "first")
		type result struct {
			term *election.Term
			err  error
		}
		results := make(chan result, 3)
		els := make([]*election.Election, 3)
		for i := range els {
			els[i] = newElection(t, e.locker(t, lockerConf{}), name)
		}
		// One at a time, each queued on the servers before the next
		// starts, so that the order they campaigned in is known.
		for i, el := range els {
			go func() {
				term, err := el.Campaign(ctx, "waiter-"+strconv.Itoa(i))
				results <- result{term, err}
			}()
			e.waitQueued(t, el.Key(), i+1)
		}
		prev := first
		require.NoError(t, first.Resign(ctx))
		for i := range els {
			var r result
			select {
			case r = <-results:
			case <-time.After(wait):
				t.Fatal("no successor elected")
			}
			require.NoError(t, r.err, "Campaign")
			if want := "waiter-" + strconv.Itoa(i); r.term.Value() != want {
				t.Fatalf("elected %q; want %q, the next in campaign order", r.term.Value(), want)
			}
			if r.term.Token() <= prev.Token() {
				t.Fatalf("successor %q token %d; want above %d", r.term.Value(), r.term.Token(), prev.Token())
			}
			l, err := els[0].Leader(ctx)
			require.NoError(t, err)
			if l.Value != r.term.Value() || l.Token != r.term.Token() {
				t.Fatalf("Leader = %+v; want the elected %q, token %d", l, r.term.Value(), r.term.Token())
			}
			prev = r.term
			require.NoError(t, r.term.Resign(ctx))
		}
	})
}

// TestUnfenced: a quorum without tokens cannot hold an election; the
// campaign gives the office back.
func TestUnfenced(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	e := &env{strategy: strategyQuorum, client: "go-redis", srvs: srvs}
	var addrs []string
	for _, s := range srvs {
		addrs = append(addrs, s.Addr())
	}
	lk, err := quorum.New(nodesFor(t, e.client, addrs), option.NodeTimeout(testNodeTimeout), option.DurableNodes(true), option.Tokens(false))
	require.NoError(t, err)
	defer lk.Close()
	el := newElection(t, lk, "unfenced")
	if _, err := el.Campaign(t.Context(), "v"); !errors.Is(err, election.ErrUnfenced) {
		t.Fatalf("Campaign: %v; want ErrUnfenced", err)
	}
	if _, err := el.Leader(t.Context()); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after the refused campaign: %v; want ErrNoLeader", err)
	}
}

// TestOpen: an election runs on the Locker dlock.Open returns, for both
// strategies.
func TestOpen(t *testing.T) {
	one := redistest.Start(t)
	three := redistest.StartN(t, 3)
	for _, tc := range []struct {
		strategy string
		srvs     []*redistest.Server
	}{{connect.StrategySingle, []*redistest.Server{one}}, {connect.StrategyQuorum, three}} {
		t.Run(tc.strategy, func(t *testing.T) {
			ctx := t.Context()
			var addrs []string
			for _, s := range tc.srvs {
				addrs = append(addrs, s.Addr())
			}
			lk, err := dlock.Open(ctx, dlock.Config{Strategy: tc.strategy, Addrs: addrs, DurableNodes: tc.strategy == connect.StrategyQuorum})
			require.NoError(t, err, "Open")
			defer lk.Close()
			el := newElection(t, lk, "open")
			obs := observe(t, el)
			if l := next(t, obs); l != (election.Leader{}) {
				t.Fatalf("first observed: %+v; want a vacancy", l)
			}
			term := campaign(t, el, "me")
			if l := nextLeader(t, obs, "me"); l.Token != term.Token() {
				t.Fatalf("observed token %d; want %d", l.Token, term.Token())
			}
			require.NoError(t, term.Resign(ctx))
			if l := next(t, obs); l != (election.Leader{}) {
				t.Fatalf("observed after Resign: %+v; want a vacancy", l)
			}
		})
	}
}
