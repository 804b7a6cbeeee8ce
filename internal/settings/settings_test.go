package settings_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/engine"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// FuzzLocker checks the lease settings a Locker takes: each is either
// refused with an *ArgError naming the setting, or resolved to a TTL with
// room after its drift margin, a retry pace with delays in range, and a
// lock's hash kept at least as long as the lease (KeepMs).
func FuzzLocker(f *testing.F) {
	f.Add(int64(30*time.Second), 0.01, int64(5*time.Millisecond), int64(200*time.Millisecond), int64(24*time.Hour))
	f.Add(int64(time.Second), 0.0, int64(0), int64(0), int64(-1))
	f.Add(int64(4*time.Millisecond), 0.01, int64(1), int64(1), int64(0))
	f.Add(int64(-1), 0.01, int64(-1), int64(1), int64(0))
	f.Add(int64(time.Second), math.NaN(), int64(1), int64(0), int64(0))
	f.Add(int64(time.Second), 0.5, int64(1), int64(1), int64(0))
	f.Add(int64(0), 0.0, int64(0), int64(0), int64(0))
	f.Add(int64(math.MaxInt64-int64(time.Hour)), 0.0, int64(1), int64(2), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, ttlNs int64, drift float64, minNs, maxNs, idleNs int64) {
		ttl, idle := time.Duration(ttlNs), time.Duration(idleNs)
		opts := []option.Option{option.TTL(ttl), option.DriftFactor(drift),
			option.Retry(time.Duration(minNs), time.Duration(maxNs)), option.IdleTTL(idle)}
		l, err := settings.New(settings.Single, opts)
		if err != nil {
			var ae *lease.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("New(%v, %v, %v..%v) = %v; want an *ArgError", ttl, drift, minNs, maxNs, err)
			}
			switch ae.Arg {
			case "TTL", "DriftFactor", "Retry":
			default:
				t.Fatalf("New(%v, %v, %v..%v) = %v: names %q", ttl, drift, minNs, maxNs, err, ae.Arg)
			}
			return
		}
		if ttl != 0 && l.TTL != ttl || ttl == 0 && l.TTL != settings.DefaultTTL {
			t.Fatalf("New(TTL %v) resolved the TTL to %v", ttl, l.TTL)
		}
		if d := settings.Drift(l.TTL, l.Drift); d < settings.DriftFloor || l.TTL-d <= d || l.Drift == 0 {
			t.Fatalf("New(%v, %v) took a TTL with drift %v (factor %v): no room left", ttl, drift, d, l.Drift)
		}
		r := l.Retry
		if !(r.Min > 0 && r.Min <= r.Max) {
			t.Fatalf("New(retry %v..%v) resolved it to %+v", minNs, maxNs, r)
		}
		for n := range 70 {
			if d := r.Delay(n); d < r.Min/2 || d > r.Max {
				t.Fatalf("%+v.Delay(%d) = %v, outside [%v, %v]", r, n, d, r.Min/2, r.Max)
			}
		}
		keep := engine.KeepMs(l.TTL, l.IdleTTL)
		ms, err := strconv.ParseInt(keep, 10, 64)
		switch {
		case err != nil:
			t.Fatalf("KeepMs(%v, %v) = %q: not a number", l.TTL, l.IdleTTL, keep)
		case idle < 0 && ms != 0:
			t.Fatalf("KeepMs(%v, %v) = %q; want 0 (for ever)", l.TTL, l.IdleTTL, keep)
		case idle >= 0 && ms < l.TTL.Milliseconds():
			t.Fatalf("KeepMs(%v, %v) = %q: shorter than the lease", l.TTL, l.IdleTTL, keep)
		}
	})
}

// FuzzCall checks a call's options: a key, a TTL, a retry pace and
// metadata are each either refused with an *ArgError naming them, or
// taken as given, a zero TTL and retry being the Locker's; metadata
// survives the owner value it travels in.
func FuzzCall(f *testing.F) {
	f.Add("k", int64(time.Second), int64(0), int64(0), "", false)
	f.Add("", int64(0), int64(1), int64(2), "host=a pid=1", true)
	f.Add("k", int64(-1), int64(5), int64(1), "x", false)
	f.Add("k", int64(0), int64(0), int64(0), string(make([]byte, lease.MaxMetadata+1)), false)
	f.Add("k", int64(0), int64(0), int64(0), " leading space\nand\x00binary", true)
	l, err := settings.New(settings.Single, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key string, ttlNs, minNs, maxNs int64, metadata string, renew bool) {
		r := settings.Pace{Min: time.Duration(minNs), Max: time.Duration(maxNs)}
		opts := []option.Option{option.TTL(time.Duration(ttlNs)), option.Retry(r.Min, r.Max),
			option.Metadata(metadata), {}, option.AutoRenew(renew)}
		err := engine.CheckKey(key)
		var c settings.Call
		if err == nil {
			c, err = l.Call(opts)
		}
		if err != nil {
			var ae *lease.ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("Call(%q, ...) = %v; want an *ArgError", key, err)
			}
			switch ae.Arg {
			case "key", "TTL", "Retry", "Metadata":
			default:
				t.Fatalf("Call(%q, ...) = %v: names %q", key, err, ae.Arg)
			}
			return
		}
		if key == "" || len(metadata) > lease.MaxMetadata || ttlNs < 0 {
			t.Fatalf("Call(%q, TTL %v, metadata of %d bytes) = %+v: took it", key, time.Duration(ttlNs), len(metadata), c)
		}
		wantTTL, wantRetry := time.Duration(ttlNs), r
		if wantTTL == 0 {
			wantTTL = l.TTL
		}
		if wantRetry == (settings.Pace{}) {
			wantRetry = l.Retry
		}
		if c.TTL != wantTTL || c.Retry != wantRetry || c.Metadata != metadata || c.AutoRenew != renew {
			t.Fatalf("Call(%q, ...) = %+v", key, c)
		}
		owner := engine.NewOwner()
		if got := engine.Metadata(engine.OwnerValue(owner, metadata)); got != metadata {
			t.Fatalf("Metadata(OwnerValue(%q, %q)) = %q", owner, metadata, got)
		}
	})
}

// TestQuorumCallTTL: on a quorum, a call's TTL must also be above twice
// the node timeout and, with the lost-data guard on, at most the max TTL;
// elsewhere neither applies. The TTL is blamed: the call gave it.
func TestQuorumCallTTL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope settings.Scope
		opts  []option.Option
		ttl   time.Duration
		ok    bool
	}{
		{"within twice the default node timeout", settings.Quorum, []option.Option{option.TTL(time.Second)}, 80 * time.Millisecond, false},
		{"within twice the default node timeout, single", settings.Single, []option.Option{option.TTL(time.Second)}, 80 * time.Millisecond, true},
		{"within twice a node timeout given", settings.Quorum, []option.Option{option.NodeTimeout(10 * time.Millisecond)}, 20 * time.Millisecond, false},
		{"above twice a node timeout given", settings.Quorum, []option.Option{option.NodeTimeout(10 * time.Millisecond)}, 25 * time.Millisecond, true},
		{"above the max TTL", settings.Quorum, []option.Option{option.TTL(time.Second)}, 2 * time.Second, false},
		{"above the max TTL, durable", settings.Quorum, []option.Option{option.TTL(time.Second), option.DurableNodes(true)}, 2 * time.Second, true},
		{"at the max TTL", settings.Quorum, []option.Option{option.TTL(time.Second), option.MaxTTL(3 * time.Second)}, 3 * time.Second, true},
		{"with the idle TTL past a Duration", settings.Quorum, []option.Option{option.IdleTTL(math.MaxInt64 / 2), option.DurableNodes(true)}, math.MaxInt64/2 + time.Second, false},
		{"with the idle TTL for ever", settings.Quorum, []option.Option{option.IdleTTL(-1), option.DurableNodes(true)}, math.MaxInt64/2 + time.Second, true},
	} {
		l, err := settings.New(tc.scope, tc.opts)
		if err != nil {
			t.Fatalf("%s: New: %v", tc.name, err)
		}
		_, err = l.Call([]option.Option{option.TTL(tc.ttl)})
		var ae *lease.ArgError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: Call(TTL %v) = %v; want it taken", tc.name, tc.ttl, err)
		case !tc.ok && (!errors.As(err, &ae) || ae.Arg != "TTL" || ae.Value != tc.ttl):
			t.Errorf("%s: Call(TTL %v) = %v; want an ArgError naming TTL %v", tc.name, tc.ttl, err, tc.ttl)
		}
	}
}

// TestCallFrom: a call that sets no TTL gets the one it is resolved from
// (a resumed lease's), checked by the Locker's rules.
func TestCallFrom(t *testing.T) {
	l, err := settings.New(settings.Quorum, []option.Option{option.TTL(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := l.CallFrom(500*time.Millisecond, nil); err != nil || c.TTL != 500*time.Millisecond {
		t.Errorf("CallFrom(500ms) = %+v, %v; want TTL 500ms", c, err)
	}
	if c, err := l.CallFrom(500*time.Millisecond, []option.Option{option.TTL(800 * time.Millisecond)}); err != nil || c.TTL != 800*time.Millisecond {
		t.Errorf("CallFrom(500ms, TTL 800ms) = %+v, %v; want TTL 800ms", c, err)
	}
	if _, err := l.CallFrom(2*time.Second, nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("CallFrom(2s) above the max TTL = %v; want ErrInvalid", err)
	}
}

// TestText: every setting with a text form reads back what Format writes,
// and refuses a text that is not of its Kind with its Syntax rule,
// naming it; a value its own rule refuses is refused with its Rule. An
// idle TTL reads "forever" and every negative duration as for ever, and
// writes it as "forever".
func TestText(t *testing.T) {
	samples := map[settings.Kind]any{
		settings.KindDuration: 1500 * time.Millisecond, settings.KindInt: 2, settings.KindFloat: 0.25,
		settings.KindBool: true, settings.KindString: "valkey-go", settings.KindSecret: "s3cret",
	}
	for i := range settings.Table {
		s := &settings.Table[i]
		if s.Param == "" {
			continue
		}
		v := samples[s.Kind]
		if got, err := s.Parse(s.Format(v)); err != nil || got != v {
			t.Errorf("%s: Parse(Format(%v)) = %v, %v; want %v", s.Name, v, got, err, v)
		}
		if s.Kind == settings.KindString || s.Kind == settings.KindSecret {
			continue // every text is one
		}
		_, err := s.Parse("x!")
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != s.Name || ae.Value != "x!" || ae.Rule != s.Syntax() {
			t.Errorf("%s: Parse(%q) = %v; want an ArgError naming %s: %s", s.Name, "x!", err, s.Name, s.Syntax())
		}
	}
	idle := settings.Of(settings.IdleTTL)
	for _, text := range []string{"forever", "-1ns", "-24h"} {
		if v, err := idle.Parse(text); err != nil || v != time.Duration(-1) {
			t.Errorf("IdleTTL: Parse(%q) = %v, %v; want -1ns, for ever", text, v, err)
		}
	}
	if got := idle.Format(-time.Hour); got != "forever" {
		t.Errorf("IdleTTL: Format(-1h) = %q; want forever", got)
	}
	for _, tc := range []struct {
		id   settings.ID
		text string
		want any
	}{
		{settings.TTL, "-1s", -time.Second}, {settings.DriftFactor, "0.5", 0.5}, {settings.DriftFactor, "NaN", nil},
		{settings.Replicas, "-1", -1}, {settings.NodeTimeout, "-1ms", -time.Millisecond}, {settings.MaxTTL, "-1m", -time.Minute},
		{settings.Client, "jedis", "jedis"}, {settings.DB, "-1", -1}, {settings.DialTimeout, "-1s", -time.Second},
	} {
		s := settings.Of(tc.id)
		_, err := s.Parse(tc.text)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != s.Name || ae.Rule != s.Rule || tc.want != nil && ae.Value != tc.want {
			t.Errorf("%s: Parse(%q) = %v; want an ArgError naming %s, %v: %s", s.Name, tc.text, err, s.Name, tc.want, s.Rule)
		}
	}
	if err := settings.Of(settings.Password).Refuse("s3cret"); strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Password: Refuse = %v; shows the password", err)
	}
}
