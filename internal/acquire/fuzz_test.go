package acquire_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
)

// FuzzCheckLease checks the lease settings a Locker takes: each is either
// refused with an *ArgError naming the setting, or leaves a lease room
// after its drift margin, paces retries with delays in range, and keeps
// the lock's hash at least as long as the lease (KeepMs).
func FuzzCheckLease(f *testing.F) {
	f.Add(int64(30*time.Second), 0.01, int64(5*time.Millisecond), int64(200*time.Millisecond), int64(24*time.Hour))
	f.Add(int64(time.Second), 0.0, int64(0), int64(0), int64(-1))
	f.Add(int64(4*time.Millisecond), 0.01, int64(1), int64(1), int64(0))
	f.Add(int64(-1), 0.01, int64(-1), int64(1), int64(0))
	f.Add(int64(time.Second), math.NaN(), int64(1), int64(0), int64(0))
	f.Add(int64(time.Second), 0.5, int64(1), int64(1), int64(0))
	f.Add(int64(math.MaxInt64), 0.49999999999999994, int64(1), int64(math.MaxInt64), int64(0))
	f.Add(int64(math.MaxInt64), 0.01, int64(math.MaxInt64), int64(math.MaxInt64), int64(24*time.Hour))
	f.Add(int64(math.MaxInt64-int64(time.Hour)), 0.0, int64(1), int64(2), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, ttlNs int64, drift float64, minNs, maxNs, idleNs int64) {
		ttl, idle := time.Duration(ttlNs), time.Duration(idleNs)
		r := lease.Retry{Min: time.Duration(minNs), Max: time.Duration(maxNs)}
		if err := acquire.CheckLease(ttl, drift, r); err != nil {
			var ae *lease.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("CheckLease(%v, %v, %+v) = %v; want an *ArgError", ttl, drift, r, err)
			}
			switch ae.Arg {
			case "ttl", "drift factor", "retry":
			default:
				t.Fatalf("CheckLease(%v, %v, %+v) = %v: names %q", ttl, drift, r, err, ae.Arg)
			}
			return
		}
		if d := acquire.Drift(ttl, drift); d < acquire.DriftFloor || ttl-d <= d {
			t.Fatalf("CheckLease(%v, %v, %+v) took a TTL with drift %v: no room left", ttl, drift, r, d)
		}
		for n := range 70 {
			d := r.Delay(n)
			lo, hi := r.Min, r.Max
			if r == (lease.Retry{}) {
				lo, hi = lease.DefaultRetry.Min, lease.DefaultRetry.Max
			}
			if d < lo/2 || d > hi {
				t.Fatalf("%+v.Delay(%d) = %v, outside [%v, %v]", r, n, d, lo/2, hi)
			}
		}
		keep := acquire.KeepMs(ttl, idle)
		ms, err := strconv.ParseInt(keep, 10, 64)
		switch {
		case err != nil:
			t.Fatalf("KeepMs(%v, %v) = %q: not a number", ttl, idle, keep)
		case idle < 0 && ms != 0:
			t.Fatalf("KeepMs(%v, %v) = %q; want 0 (for ever)", ttl, idle, keep)
		case idle >= 0 && ms < ttl.Milliseconds():
			t.Fatalf("KeepMs(%v, %v) = %q: shorter than the lease", ttl, idle, keep)
		}
	})
}

// FuzzOptions checks the per-acquisition options: a key, a TTL, a retry
// policy and metadata are each either refused with an *ArgError naming
// them, or taken as given; metadata survives the owner value it travels
// in.
func FuzzOptions(f *testing.F) {
	f.Add("k", int64(time.Second), int64(0), int64(0), "", false)
	f.Add("", int64(0), int64(1), int64(2), "host=a pid=1", true)
	f.Add("k", int64(-1), int64(5), int64(1), "x", false)
	f.Add("k", int64(0), int64(0), int64(0), string(make([]byte, lease.MaxMetadata+1)), false)
	f.Add("k", int64(0), int64(0), int64(0), " leading space\nand\x00binary", true)
	f.Fuzz(func(t *testing.T, key string, ttlNs, minNs, maxNs int64, metadata string, renew bool) {
		base := lease.Options{TTL: 30 * time.Second}
		opts := []lease.Option{
			lease.WithTTL(time.Duration(ttlNs)),
			lease.WithRetry(lease.Retry{Min: time.Duration(minNs), Max: time.Duration(maxNs)}),
			lease.WithMetadata(metadata), nil,
		}
		if renew {
			opts = append(opts, lease.WithAutoRenew())
		}
		o, changed, err := acquire.Options(context.Background(), key, base, opts)
		if err != nil {
			var ae *lease.ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("Options(%q, ...) = %v; want an *ArgError", key, err)
			}
			switch ae.Arg {
			case "key", "retry", "metadata":
			default:
				t.Fatalf("Options(%q, ...) = %v: names %q", key, err, ae.Arg)
			}
			return
		}
		if key == "" || len(metadata) > lease.MaxMetadata || !changed {
			t.Fatalf("Options(%q, metadata of %d bytes) = %+v, %v: took it", key, len(metadata), o, changed)
		}
		wantTTL := time.Duration(ttlNs)
		if wantTTL == 0 {
			wantTTL = base.TTL
		}
		if o.TTL != wantTTL || o.Metadata != metadata || o.AutoRenew != renew {
			t.Fatalf("Options(%q, ...) = %+v", key, o)
		}
		owner := acquire.NewOwner()
		if got := acquire.Metadata(acquire.OwnerValue(owner, metadata)); got != metadata {
			t.Fatalf("Metadata(OwnerValue(%q, %q)) = %q", owner, metadata, got)
		}
	})
}

// FuzzStaleCounter reads any error reply as a DLSTALE refusal or not: it
// is one exactly when it starts "DLSTALE ", and its counter is the
// decimal after that, or 0 when there is none to read.
func FuzzStaleCounter(f *testing.F) {
	for _, s := range []string{"DLSTALE 42", "DLSTALE ", "DLSTALE", "DLSTALE x", "DLSTALE 18446744073709551616",
		"DLSTALE -1", "DLSTALE 7 more", "NOSCRIPT No matching script", "dlstale 5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		h, ok := acquire.StaleCounter(&node.ReplyError{Msg: msg})
		rest, stale := strings.CutPrefix(msg, "DLSTALE ")
		if ok != stale {
			t.Fatalf("StaleCounter(%q) = %v; want %v", msg, ok, stale)
		}
		want, err := strconv.ParseUint(rest, 10, 64)
		if !stale || err != nil {
			want = 0
		}
		if uint64(h) != want {
			t.Fatalf("StaleCounter(%q) = %d; want %d", msg, h, want)
		}
		if _, ok := acquire.StaleCounter(fmt.Errorf("wrapped: %w", &node.ReplyError{Msg: msg})); ok != stale {
			t.Fatalf("StaleCounter(wrapped %q) = %v; want %v", msg, ok, stale)
		}
	})
}
