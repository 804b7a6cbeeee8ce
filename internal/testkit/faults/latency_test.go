package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/node"
	"github.com/dlockgo/dlock/option"
	"github.com/dlockgo/dlock/quorum"
)

// latencyTries is the number of acquisitions per latency step.
const latencyTries = 3

// TestNetworkDelay grows the latency of every reply (toxiproxy) past the
// validity margin. An acquisition that took too long is refused, never
// granted with no validity left, and leaves no lock behind.
//
// The drift factor is 0.3 here: the quorum's node timeout must stay below
// half the TTL, so with the default 1% a two-phase acquisition that
// answers within the node timeout always has validity left; the node
// timeout, not the validity check, would be the limit.
func TestNetworkDelay(t *testing.T) {
	t.Run("quorum", func(t *testing.T) {
		t.Parallel()
		// TTL 1s - drift 302ms = 698ms for two round trips.
		delay(t, "quorum", goRedis, time.Second, []time.Duration{0, 150, 300, 380, 420})
	})
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		// TTL 500ms - drift 152ms = 348ms for one round trip.
		delay(t, "single", valkeyGo, 500*time.Millisecond, []time.Duration{0, 150, 300, 400, 450})
	})
}

func delay(t *testing.T, strategy, client string, ttl time.Duration, steps []time.Duration) {
	const drift = 0.3
	n := 5
	if strategy == "single" {
		n = 1
	}
	srvs := redistest.StartN(t, n)
	proxies := make([]*redistest.Proxy, n)
	nodes := make([]node.Node, n)
	for i, s := range srvs {
		proxies[i] = redistest.StartProxy(t, s.Addr())
		nodes[i] = redistest.NodeFor(t, client, proxies[i].Addr())
	}
	var lk locker
	if strategy == "single" {
		lk = newSingle(t, nodes[0], option.TTL(ttl), option.DriftFactor(drift))
	} else {
		lk = newQuorum(t, nodes, option.DurableNodes(true), option.TTL(ttl), option.DriftFactor(drift),
			option.NodeTimeout(450*time.Millisecond))
	}
	redistest.Warm(t, lk)
	margin := ttl - settings.Drift(ttl, drift)
	rounds := 2 // phase 1 and the token's phase 2
	if strategy == "single" {
		rounds = 1
	}
	for _, step := range steps {
		lat := step * time.Millisecond
		row := &Row{Scenario: "7 network delay", Variant: fmt.Sprintf("+%v per reply, TTL %v, drift 0.3", lat, ttl),
			Strategy: strategy, Client: client}
		need := time.Duration(rounds) * lat
		switch {
		case need < margin-100*time.Millisecond:
			row.Expected = "granted, with validity left"
		case need > margin+30*time.Millisecond:
			row.Expected = "refused for lack of validity; no lock left"
		default:
			row.Expected = "either; never granted without validity"
		}
		t.Run(fmt.Sprint(lat), func(t *testing.T) {
			record(t, row)
			for _, p := range proxies {
				p.SetLatency(lat)
			}
			res := newResource()
			ok, minLeft := 0, time.Duration(-1)
			var errs []error
			var failed []float64
			for i := range latencyTries {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				start := time.Now()
				l, err := lk.TryAcquire(ctx, "k")
				d := time.Since(start)
				if err != nil {
					errs = append(errs, err)
					failed = append(failed, float64(d.Microseconds())/1000)
					cancel()
					continue
				}
				ok++
				left := l.TTL()
				if minLeft < 0 || left < minLeft {
					minLeft = left
				}
				if left <= 0 || l.Err() != nil {
					t.Errorf("granted with no validity left (%v, %v)", left, l.Err())
				}
				res.granted(l)
				_ = res.write(l, fmt.Sprint(i))
				res.released(l)
				_ = l.Release(ctx)
				cancel()
			}
			for _, p := range proxies {
				p.SetLatency(0)
			}
			res.fill(t, row)
			row.Acquired, row.Attempts = Int(ok), Int(latencyTries)
			if len(failed) > 0 {
				row.TimeToFailMs = Ms(median(failed))
			}
			row.Observed = errKinds(errs)
			if ok > 0 {
				row.Observed = strings.TrimSuffix(fmt.Sprintf("least validity left at grant %v; %s", minLeft.Round(time.Millisecond), row.Observed), "; ")
			}
			// A quorum release returns once a majority let go and finishes
			// on the other nodes in the background: allow it a third of
			// the TTL, well before a lock it missed would expire.
			var left []int
			for deadline := time.Now().Add(ttl / 3); ; time.Sleep(10 * time.Millisecond) {
				left = left[:0]
				for i, s := range srvs {
					if strategy == "single" {
						if lockField(t, s, "owner") != "" {
							left = append(left, i)
						}
					} else if lockLeft(t, s, "k") {
						left = append(left, i)
					}
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(left) > 0 {
				t.Errorf("lock left on %v after the step", left)
			}
			switch row.Expected[:5] {
			case "grant":
				if ok != latencyTries {
					t.Errorf("%d of %d granted (%s); want all", ok, latencyTries, errKinds(errs))
				}
			case "refus":
				for _, err := range errs {
					if !errors.Is(err, quorum.ErrNoValidity) && !errors.Is(err, lease.ErrExpired) {
						t.Errorf("refused by %v; want for lack of validity", err)
					}
				}
				if ok != 0 {
					t.Errorf("%d granted; want none", ok)
				}
			}
		})
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s { // insertion sort: a handful of values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
