// Package otelmetric records lease events as OpenTelemetry metrics. New
// returns an observe.Observer to hand to a Locker with option.Observer
// (combine it with others through observe.Multi).
//
// Instruments, under the meter named by ScopeName:
//
//	dlock.acquire.duration  histogram, s    Acquire or TryAcquire call to its outcome; dlock.strategy, dlock.outcome
//	dlock.acquisitions      counter         acquisition calls; dlock.strategy, dlock.outcome
//	dlock.votes             counter         node answers to quorum attempts; dlock.node, dlock.outcome
//	dlock.renewals          counter         automatic renewals; dlock.strategy, dlock.result
//	dlock.leases.lost       counter         leases ended before Release; dlock.strategy, dlock.cause
//	dlock.releases          counter         Releases that ended a lease; dlock.strategy, dlock.result
//	dlock.leases.held       up/down counter leases held now; dlock.strategy
//	dlock.master.changes    counter         failovers a Sentinel Locker followed (observe.MasterChanged); dlock.node, the new master
//	dlock.breaks            counter         operators' breaks (observe.ForceReleased, ForceRelease); dlock.strategy, dlock.result
//	dlock.rate.decisions    counter         rate limit calls (observe.RateDecided, package ratelimit); dlock.strategy, dlock.outcome
//
// dlock.outcome is observe.Outcome of the call's error ("acquired", "taken",
// "canceled", "invalid", "error") on acquisitions, and the node's answer
// ("ok", "taken", "error", "timeout", "sits_out") on votes, and
// observe.RateOutcome ("allowed", "refused", "invalid", "canceled",
// "error") on rate limit calls, whose dlock.strategy is "ratelimit"; dlock.result
// is "ok" or "failed"; dlock.cause is "expired" (validity ran out by the
// local clock) or "lost" (a renewal was refused). Lock keys are not
// attributes: their number is unbounded.
//
// A lease reports its end once: its loss, or the Release that ended it. A
// Release of a lease that had already ended (expired, lost, or released
// before) reports nothing, so dlock.releases counts only Releases that
// ended a lease, and dlock.leases.held counts each lease down once. It
// never goes below zero for a strategy and key, should a lease's end be
// reported before its acquisition.
//
// The package is a Go module of its own, as go-redis keeps extra/redisotel,
// so that dlock's other users never resolve OpenTelemetry. Add it with
//
//	go get github.com/dlockgo/dlock/observe/otelmetric
//
// Its go.mod requires the dlock release it was tagged with; require a newer
// dlock in your own go.mod to use one.
package otelmetric

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
)

// ScopeName is the instrumentation scope of the meter New creates.
const ScopeName = "github.com/dlockgo/dlock/observe/otelmetric"

// Attribute keys.
const (
	KeyStrategy = attribute.Key("dlock.strategy")
	KeyOutcome  = attribute.Key("dlock.outcome")
	KeyNode     = attribute.Key("dlock.node")
	KeyResult   = attribute.Key("dlock.result")
	KeyCause    = attribute.Key("dlock.cause")
)

// DefaultBuckets are the bucket boundaries, in seconds, of
// dlock.acquire.duration: from a single server's round trip on a local
// network to a blocking Acquire that waited out a lease.
var DefaultBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Option configures New.
type Option func(*config)

type config struct {
	buckets []float64
}

// WithBuckets sets the bucket boundaries, in seconds, of
// dlock.acquire.duration. The default is DefaultBuckets.
func WithBuckets(b ...float64) Option {
	return func(c *config) { c.buckets = b }
}

// New returns an Observer that records events on a meter of mp. It returns
// the errors of the instruments mp failed to create, joined. A nil mp is an
// *lease.ArgError: pass otel.GetMeterProvider() for the global one.
//
// Observe allocates nothing once it has seen each combination of
// attributes: their sets are built once and kept.
func New(mp metric.MeterProvider, opts ...Option) (observe.Observer, error) {
	if mp == nil {
		return nil, &lease.ArgError{Arg: "meter provider", Value: mp, Rule: "must not be nil"}
	}
	cfg := config{buckets: DefaultBuckets}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	m := mp.Meter(ScopeName)
	o := &observer{
		byOutcome:  newSets(KeyStrategy, KeyOutcome),
		byNode:     newSets(KeyNode, KeyOutcome),
		byResult:   newSets(KeyStrategy, KeyResult),
		byCause:    newSets(KeyStrategy, KeyCause),
		byStrategy: newSets(KeyStrategy, ""),
		byMaster:   newSets(KeyNode, ""),
		held:       make(map[[2]string]int),
	}
	for _, st := range []string{"single", "quorum"} {
		for _, out := range []string{"acquired", "taken", "canceled", "invalid", "error"} {
			o.byOutcome.get(st, out)
		}
		o.byResult.get(st, "ok")
		o.byResult.get(st, "failed")
		o.byCause.get(st, "expired")
		o.byCause.get(st, "lost")
		o.byStrategy.get(st, "")
	}
	for _, out := range []string{"allowed", "refused", "canceled", "invalid", "error"} {
		o.byOutcome.get("ratelimit", out)
	}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	o.duration, err = m.Float64Histogram("dlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an Acquire or TryAcquire call to its outcome."),
		metric.WithExplicitBucketBoundaries(cfg.buckets...))
	add(err)
	o.acquisitions, err = m.Int64Counter("dlock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquire and TryAcquire calls, by outcome."))
	add(err)
	o.votes, err = m.Int64Counter("dlock.votes", metric.WithUnit("{vote}"),
		metric.WithDescription("Answers of quorum nodes to acquisition attempts, by node and answer."))
	add(err)
	o.renewals, err = m.Int64Counter("dlock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Automatic renewals of leases, by result."))
	add(err)
	o.lost, err = m.Int64Counter("dlock.leases.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended before Release, by cause."))
	add(err)
	o.releases, err = m.Int64Counter("dlock.releases", metric.WithUnit("{release}"),
		metric.WithDescription("Release calls that ended a lease, by result."))
	add(err)
	o.leases, err = m.Int64UpDownCounter("dlock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now: acquired and not yet released or lost."))
	add(err)
	o.breaks, err = m.Int64Counter("dlock.breaks", metric.WithUnit("{break}"),
		metric.WithDescription("Operators' breaks of a lock (ForceRelease), by result."))
	add(err)
	o.rates, err = m.Int64Counter("dlock.rate.decisions", metric.WithUnit("{call}"),
		metric.WithDescription("Rate limit calls (Allow, AllowN, Wait, WaitN), by outcome."))
	add(err)
	o.masters, err = m.Int64Counter("dlock.master.changes", metric.WithUnit("{change}"),
		metric.WithDescription("Changes of the master a Locker follows through Sentinels (failovers), by new master."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

type observer struct {
	duration     metric.Float64Histogram
	acquisitions metric.Int64Counter
	votes        metric.Int64Counter
	renewals     metric.Int64Counter
	lost         metric.Int64Counter
	releases     metric.Int64Counter
	leases       metric.Int64UpDownCounter
	masters      metric.Int64Counter
	breaks       metric.Int64Counter
	rates        metric.Int64Counter

	byOutcome, byNode, byResult, byCause, byStrategy, byMaster *sets

	// held counts the leases held per strategy and key. Each lease
	// reports one end, but a lease born with almost no validity left can
	// report its loss before its acquisition: dlock.leases.held counts a
	// lease down only while its key has one counted up.
	heldMu sync.Mutex
	held   map[[2]string]int
}

func (o *observer) Observe(e observe.Event) {
	ctx := context.Background()
	switch e.Kind {
	case observe.AcquireEnded:
		s := o.byOutcome.get(e.Strategy, observe.Outcome(e.Err))
		o.duration.Record(ctx, e.Wait.Seconds(), s.record...)
		o.acquisitions.Add(ctx, 1, s.add...)
		if e.Err == nil {
			o.hold(e, 1)
		}
	case observe.Vote:
		o.votes.Add(ctx, 1, o.byNode.get(e.Node, e.Outcome).add...)
	case observe.Renewed:
		o.renewals.Add(ctx, 1, o.byResult.get(e.Strategy, result(e.Err)).add...)
	case observe.Lost:
		cause := "lost"
		if errors.Is(e.Err, lease.ErrExpired) {
			cause = "expired"
		}
		o.lost.Add(ctx, 1, o.byCause.get(e.Strategy, cause).add...)
		o.hold(e, -1)
	case observe.Released:
		o.releases.Add(ctx, 1, o.byResult.get(e.Strategy, result(e.Err)).add...)
		o.hold(e, -1)
	case observe.MasterChanged:
		o.masters.Add(ctx, 1, o.byMaster.get(e.Node, "").add...)
	case observe.ForceReleased:
		o.breaks.Add(ctx, 1, o.byResult.get(e.Strategy, result(e.Err)).add...)
	case observe.RateDecided:
		o.rates.Add(ctx, 1, o.byOutcome.get(e.Strategy, e.Outcome).add...)
	}
}

// hold moves dlock.leases.held by delta for e's lease, never below the
// number of leases counted up on e's key.
func (o *observer) hold(e observe.Event, delta int) {
	k := [2]string{e.Strategy, e.Key}
	o.heldMu.Lock()
	n := o.held[k] + delta
	if n < 0 {
		o.heldMu.Unlock()
		return
	}
	if n == 0 {
		delete(o.held, k)
	} else {
		o.held[k] = n
	}
	o.heldMu.Unlock()
	o.leases.Add(context.Background(), int64(delta), o.byStrategy.get(e.Strategy, "").add...)
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return "failed"
}

// sets keeps the attribute set of each pair of values of two keys (or of
// one, when the second key is empty), built on first use.
type sets struct {
	k1, k2 attribute.Key
	mu     sync.RWMutex
	m      map[[2]string]*measure
}

// measure holds one attribute set as the options of both kinds of
// instrument calls, so that a call passes a slice it does not allocate.
type measure struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newSets(k1, k2 attribute.Key) *sets {
	return &sets{k1: k1, k2: k2, m: make(map[[2]string]*measure)}
}

func (s *sets) get(v1, v2 string) *measure {
	k := [2]string{v1, v2}
	s.mu.RLock()
	m, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return m
	}
	set := attribute.NewSet(s.k1.String(v1))
	if s.k2 != "" {
		set = attribute.NewSet(s.k1.String(v1), s.k2.String(v2))
	}
	opt := metric.WithAttributeSet(set)
	m = &measure{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
	s.mu.Lock()
	if prev, ok := s.m[k]; ok {
		m = prev
	} else {
		s.m[k] = m
	}
	s.mu.Unlock()
	return m
}
