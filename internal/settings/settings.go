// Package settings describes every setting of dlock's Lockers, primitives
// and calls once (Table: name, URL parameter, type, where it applies, its
// default, its rule) and resolves the options a constructor or a call was
// given against it, in one place: New for a constructor, Locker.Call for
// a call. Package option is how users name them.
package settings

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/acquire"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/leasing"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
)

// Kind is the type of a setting's value.
type Kind uint8

const (
	KindDuration Kind = iota + 1
	KindInt
	KindFloat
	KindBool
	KindString
	KindObserver
	KindRetry // two durations, min..max
)

// Scope is a set of the places a setting applies to: a constructor, or
// the acquiring calls (Calls).
type Scope uint16

const (
	Single Scope = 1 << iota
	Quorum
	Permits
	Claims
	RWLock
	RateLimit
	Election
	Calls
)

// Lockers are the constructors of what hands out leases of its own: they
// share TTL, IdleTTL, Retry, DriftFactor and Observer.
const Lockers = Single | Quorum | Permits | Claims | RWLock

var scopeNames = [...]string{"single.New", "quorum.New", "permits.New", "claims.New", "rwlock.New",
	"ratelimit.New", "election.New", "the acquiring calls"}

// String lists the places s names, as the "applies to" rule prints them.
func (s Scope) String() string {
	var names []string
	for i, n := range scopeNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0] + " only"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// ID names a setting; it is its place in Table, from 1.
type ID uint8

const (
	TTL ID = iota + 1
	IdleTTL
	Retry
	DriftFactor
	Observer
	AutoRenew
	Metadata
	Replicas
	ReplicaTimeout
	DurableNodes
	NodeTimeout
	MaxTTL
	Tokens
	KeepDone
)

// Setting is one setting, as every layer shows it.
type Setting struct {
	ID      ID
	Name    string // the option's name, and Config's field: "TTL", "NodeTimeout"
	Param   string // the URL parameter, and (with '-' for '_') the command's flag; "" for none
	Kind    Kind
	Scopes  Scope
	Default string // as the docs print it
	Rule    string // the *lease.ArgError's rule for a bad value; "" when every value is good
	Doc     string // one line, for the package doc and the flags' usage
}

// The defaults, as Table's Default fields print them.
const (
	DefaultTTL         = 30 * time.Second
	DefaultIdleTTL     = time.Minute
	DefaultRetryMin    = 5 * time.Millisecond
	DefaultRetryMax    = 200 * time.Millisecond
	DefaultDriftFactor = 0.01
	// QuorumNodeTimeout is the least node timeout of a quorum by
	// default: each acquisition bounds its calls to one node by
	// max(QuorumNodeTimeout, TTL/50), 600 ms for the default TTL. A fixed
	// 50 ms failed about 1% of attempts with 64 concurrent callers on a
	// loaded two-core machine; TTL/50 stays small next to the TTL.
	QuorumNodeTimeout = 50 * time.Millisecond
	// RateNodeTimeout bounds each call of a rate limiter to one node of
	// several by default; on one node the caller's context alone bounds it.
	RateNodeTimeout = 100 * time.Millisecond
	DefaultKeepDone = time.Minute
)

// DefaultRetry is the pace of a blocking acquire by default.
var DefaultRetry = acquire.Retry{Min: DefaultRetryMin, Max: DefaultRetryMax}

// Table is every setting, in ID order.
var Table = []Setting{
	{TTL, "TTL", "ttl", KindDuration, Lockers | Election | Calls, "30s",
		"must be >= 0 (0: the default) and above twice the drift margin (TTL × DriftFactor + 2ms); " +
			"on a quorum also above twice NodeTimeout, at most MaxTTL unless DurableNodes, " +
			"and with IdleTTL and the sit-out within a time.Duration",
		"how long a lease lives without an extension; a call's and an election's default is the Locker's"},
	{IdleTTL, "IdleTTL", "idle_ttl", KindDuration, Lockers, "1m", "",
		"how long a key's fence counter outlives its last lease; < 0: for ever"},
	{Retry, "Retry", "", KindRetry, Lockers | Election | Calls, "5ms..200ms",
		"must be 0, 0 (the default) or have 0 < min <= max",
		"the pace of a blocking acquire, backoff from min to max; a call's and an election's default is the Locker's"},
	{DriftFactor, "DriftFactor", "", KindFloat, Lockers, "0.01",
		"must be in [0, 0.5) (0: the default)",
		"the share of the TTL set aside for clock drift, on top of 2ms"},
	{Observer, "Observer", "", KindObserver, Lockers | RateLimit | Election, "none", "",
		"hears acquisitions, votes, renewals, losses and releases; must not block"},
	{AutoRenew, "AutoRenew", "", KindBool, Calls, "off", "",
		"renews the lease in the background until Release, or until a renewal is refused"},
	{Metadata, "Metadata", "", KindString, Calls, "none",
		"must be at most " + strconv.Itoa(lease.MaxMetadata) + " bytes (lease.MaxMetadata)",
		"stored with the lock while it is held, for Inspect: who holds it"},
	{Replicas, "Replicas", "replicas", KindInt, Single, "0", "must be >= 0",
		"how many replicas must acknowledge each claim; 0: none"},
	{ReplicaTimeout, "ReplicaTimeout", "replica_timeout", KindDuration, Single, "0",
		"must be > 0 when Replicas is, and 0 when it is not",
		"how long a claim waits for its replicas' acknowledgements"},
	{DurableNodes, "DurableNodes", "durable", KindBool, Quorum, "off", "",
		"declares that no node loses an acknowledged write: the lost-data guard off"},
	{NodeTimeout, "NodeTimeout", "node_timeout", KindDuration, Quorum | RateLimit,
		"max(50ms, TTL/50) on a quorum; 100ms for a rate limit on several nodes, none on one",
		"must be >= 0 (0: the default) and, on a quorum, below half the TTL",
		"bounds each call to one node"},
	{MaxTTL, "MaxTTL", "max_ttl", KindDuration, Quorum, "the TTL",
		"must be >= 0 (0: the TTL), at least the TTL unless DurableNodes, " +
			"and with NodeTimeout and the drift margin within a time.Duration (the sit-out)",
		"how long a node that lost its data sits out"},
	{Tokens, "Tokens", "", KindBool, Quorum, "on", "",
		"fencing tokens; off is plain one-phase Redlock"},
	{KeepDone, "KeepDone", "", KindDuration, Claims, "1m",
		"must be 0 (the default) or at least 1ms",
		"how long a completed item's record is kept"},
}

// Of returns id's Setting.
func Of(id ID) *Setting { return &Table[id-1] }

// Option is one setting's value, given to a constructor or a call. The
// zero Option does nothing.
type Option struct {
	id   ID
	a, b int64 // a duration, an int, a bool, a float's bits; b: Retry's max, Replicas' timeout
	s    string
	o    observe.Observer
}

// OfDuration returns the Option that sets id, a duration, to d.
func OfDuration(id ID, d time.Duration) Option { return Option{id: id, a: int64(d)} }

// OfFloat returns the Option that sets id, a float, to f.
func OfFloat(id ID, f float64) Option { return Option{id: id, a: int64(math.Float64bits(f))} }

// OfBool returns the Option that sets id, a bool, to on.
func OfBool(id ID, on bool) Option {
	o := Option{id: id}
	if on {
		o.a = 1
	}
	return o
}

// OfString returns the Option that sets id, a string, to s.
func OfString(id ID, s string) Option { return Option{id: id, s: s} }

// OfObserver returns the Option that sets the Observer.
func OfObserver(o observe.Observer) Option { return Option{id: Observer, o: o} }

// OfRetry returns the Option that sets Retry.
func OfRetry(min, max time.Duration) Option { return Option{id: Retry, a: int64(min), b: int64(max)} }

// OfReplicas returns the Option that sets Replicas and ReplicaTimeout.
func OfReplicas(n int, timeout time.Duration) Option {
	return Option{id: Replicas, a: int64(n), b: int64(timeout)}
}

// Yields returns the settings o sets: one, or two for Replicas (and
// ReplicaTimeout); none for the zero Option.
func Yields(o Option) []ID {
	switch o.id {
	case 0:
		return nil
	case Replicas:
		return []ID{Replicas, ReplicaTimeout}
	}
	return []ID{o.id}
}

func (o Option) d() time.Duration { return time.Duration(o.a) }
func (o Option) f() float64       { return math.Float64frombits(uint64(o.a)) }
func (o Option) on() bool         { return o.a != 0 }
func (o Option) retry() acquire.Retry {
	return acquire.Retry{Min: time.Duration(o.a), Max: time.Duration(o.b)}
}

// value is o's value as an *lease.ArgError shows it.
func (o Option) value() any {
	switch o.id {
	case Retry:
		return retryValue(o.retry())
	case Replicas:
		return fmt.Sprintf("%d, %v", o.a, time.Duration(o.b))
	case Metadata:
		return o.s
	case Observer:
		return fmt.Sprintf("%T", o.o)
	}
	switch Of(o.id).Kind {
	case KindDuration:
		return o.d()
	case KindFloat:
		return o.f()
	case KindBool:
		return o.on()
	}
	return o.a
}

func retryValue(r acquire.Retry) string { return r.Min.String() + ".." + r.Max.String() }

// Refuse returns the *lease.ArgError of id with value v: its Rule.
func Refuse(id ID, v any) error {
	return &argerr.Error{Arg: Of(id).Name, Value: v, Rule: Of(id).Rule}
}

// applies returns the *lease.ArgError of o given where it does not apply.
func (o Option) applies(scope Scope) error {
	s := Of(o.id)
	if s.Scopes&scope == 0 {
		return &argerr.Error{Arg: s.Name, Value: o.value(), Rule: "applies to " + s.Scopes.String()}
	}
	return nil
}

// Locker is the resolved configuration of a Locker, a primitive, a rate
// limiter or an election: every field a setting, defaults settled (see
// New), Reporter built from Observer.
type Locker struct {
	Scope          Scope // the one constructor resolved for
	TTL            time.Duration
	IdleTTL        time.Duration // < 0: for ever
	Retry          acquire.Retry
	Drift          float64
	Observer       observe.Observer
	Reporter       leasing.Reporter // of Observer; nil when it is
	Replicas       int
	ReplicaTimeout time.Duration
	Durable        bool
	NodeTimeout    time.Duration // as given, 0 for the default: see NodeTimeoutFor and RateNodeTimeout
	MaxTTL         time.Duration
	Tokens         bool
	KeepDone       time.Duration
}

// New resolves opts for the constructor scope (one of the Scope
// constants): it returns an *lease.ArgError for an Option that does not
// apply there, or for a value that breaks its setting's Rule (the cross
// rules too: the TTL above twice the drift margin and, on a quorum, twice
// the node timeout, the max TTL at least the TTL, replicas and their
// timeout together), and settles the defaults: a zero value is the
// setting's Default. In an election, a zero TTL and Retry stay zero: the
// Locker's apply at its calls. Later options override earlier ones; the
// zero Option does nothing.
func New(scope Scope, opts []Option) (Locker, error) {
	l := Locker{Scope: scope, Tokens: true}
	var given [KeepDone + 1]bool
	for _, o := range opts {
		if o.id == 0 {
			continue
		}
		if err := o.applies(scope); err != nil {
			return Locker{}, err
		}
		given[o.id] = true
		switch o.id {
		case TTL:
			l.TTL = o.d()
		case IdleTTL:
			l.IdleTTL = o.d()
		case Retry:
			l.Retry = o.retry()
		case DriftFactor:
			l.Drift = o.f()
		case Observer:
			l.Observer = o.o
		case Replicas:
			l.Replicas, l.ReplicaTimeout = int(o.a), time.Duration(o.b)
		case DurableNodes:
			l.Durable = o.on()
		case NodeTimeout:
			l.NodeTimeout = o.d()
		case MaxTTL:
			l.MaxTTL = o.d()
		case Tokens:
			l.Tokens = o.on()
		case KeepDone:
			l.KeepDone = o.d()
		}
	}
	if err := l.check(); err != nil {
		return Locker{}, err
	}
	l.Reporter = acquire.Reporter(l.Observer)
	if scope&Lockers == 0 {
		return l, nil
	}
	if l.TTL == 0 {
		l.TTL = DefaultTTL
	}
	if l.IdleTTL == 0 {
		l.IdleTTL = DefaultIdleTTL
	}
	if l.Retry == (acquire.Retry{}) {
		l.Retry = DefaultRetry
	}
	if l.Drift == 0 {
		l.Drift = DefaultDriftFactor
	}
	if scope == Claims && l.KeepDone == 0 {
		l.KeepDone = DefaultKeepDone
	}
	if !l.roomForDrift(l.TTL) {
		return Locker{}, Refuse(TTL, l.TTL)
	}
	if scope == Quorum {
		if given[NodeTimeout] && l.NodeTimeout >= l.TTL/2 {
			return Locker{}, Refuse(NodeTimeout, l.NodeTimeout)
		}
		if given[MaxTTL] && l.MaxTTL != 0 && !l.Durable && l.MaxTTL < l.TTL {
			return Locker{}, Refuse(MaxTTL, l.MaxTTL)
		}
		if l.MaxTTL == 0 {
			l.MaxTTL = l.TTL
		}
		if !SumFits(l.MaxTTL, l.NodeTimeoutFor(l.MaxTTL), acquire.Drift(l.MaxTTL, l.Drift)) {
			if given[MaxTTL] && l.MaxTTL != l.TTL {
				return Locker{}, Refuse(MaxTTL, l.MaxTTL)
			}
			return Locker{}, Refuse(TTL, l.TTL)
		}
	}
	return l, l.CheckTTL(l.TTL)
}

// check applies each setting's own rule, the cross rules left to New.
func (l *Locker) check() error {
	switch {
	case !(l.Drift >= 0 && l.Drift < 0.5):
		return Refuse(DriftFactor, l.Drift)
	case l.TTL < 0:
		return Refuse(TTL, l.TTL)
	case l.Retry != (acquire.Retry{}) && !(l.Retry.Min > 0 && l.Retry.Min <= l.Retry.Max):
		return Refuse(Retry, retryValue(l.Retry))
	case l.Replicas < 0:
		return Refuse(Replicas, l.Replicas)
	case l.Replicas > 0 && l.ReplicaTimeout <= 0, l.Replicas == 0 && l.ReplicaTimeout != 0:
		// WAIT with timeout 0 blocks for ever.
		return Refuse(ReplicaTimeout, l.ReplicaTimeout)
	case l.NodeTimeout < 0:
		return Refuse(NodeTimeout, l.NodeTimeout)
	case l.MaxTTL < 0:
		return Refuse(MaxTTL, l.MaxTTL)
	case l.KeepDone < 0, l.KeepDone > 0 && l.KeepDone < time.Millisecond:
		return Refuse(KeepDone, l.KeepDone)
	}
	return nil
}

// CheckTTL returns TTL's *lease.ArgError unless a lease of ttl is one the
// Locker can serve: above twice the drift margin and, on a quorum, twice
// the node timeout for ttl, at most the max TTL while the lost-data guard
// is on, and with the idle TTL within a time.Duration.
func (l *Locker) CheckTTL(ttl time.Duration) error {
	if !l.roomForDrift(ttl) {
		return Refuse(TTL, ttl)
	}
	if l.Scope != Quorum {
		return nil
	}
	// The fence counter is kept ttl plus the idle TTL: a sum past the
	// largest Duration turns negative, which the servers refuse.
	if l.IdleTTL > 0 && !SumFits(ttl, l.IdleTTL) || l.NodeTimeoutFor(ttl) >= ttl/2 || !l.Durable && ttl > l.MaxTTL {
		return Refuse(TTL, ttl)
	}
	return nil
}

// roomForDrift reports whether a lease of ttl is above twice its drift
// margin: one whose whole TTL goes to drift could never be valid.
func (l *Locker) roomForDrift(ttl time.Duration) bool {
	// ttl-d > d, not ttl > 2*d: twice the drift of a TTL near the largest
	// Duration overflows.
	d := acquire.Drift(ttl, l.Drift)
	return ttl > 0 && ttl-d > d
}

// NodeTimeoutFor returns a quorum's bound of one call to a node, for
// leases of ttl.
func (l *Locker) NodeTimeoutFor(ttl time.Duration) time.Duration {
	if l.NodeTimeout > 0 {
		return l.NodeTimeout
	}
	return max(QuorumNodeTimeout, ttl/50)
}

// RateNodeTimeout returns a rate limiter's bound of one call to a node, on
// nodes nodes; 0 for none.
func (l *Locker) RateNodeTimeout(nodes int) time.Duration {
	if l.NodeTimeout == 0 && nodes > 1 {
		return RateNodeTimeout
	}
	return l.NodeTimeout
}

// SumFits reports whether the sum of the non-negative ds is at most the
// largest Duration.
func SumFits(ds ...time.Duration) bool {
	var sum time.Duration
	for _, d := range ds {
		if d > math.MaxInt64-sum {
			return false
		}
		sum += d
	}
	return true
}

// Call is a call's settings, resolved over its Locker's.
type Call struct {
	TTL       time.Duration
	Retry     acquire.Retry
	AutoRenew bool
	Metadata  string
}

// Call resolves a call's opts over l: a zero TTL or Retry is the Locker's.
// It returns an *lease.ArgError for an Option that does not apply to a
// call, or a value that breaks its setting's Rule, a TTL other than the
// Locker's by the Locker's rules (CheckTTL). Without opts it costs
// nothing but the copy.
func (l *Locker) Call(opts []Option) (Call, error) { return l.CallFrom(l.TTL, opts) }

// CallFrom is Call with ttl as the TTL of a call that sets none (a
// resumed lease's, say).
func (l *Locker) CallFrom(ttl time.Duration, opts []Option) (Call, error) {
	c := Call{TTL: ttl, Retry: l.Retry}
	for _, o := range opts {
		if o.id == 0 {
			continue
		}
		if err := o.applies(Calls); err != nil {
			return Call{}, err
		}
		switch o.id {
		case TTL:
			if d := o.d(); d < 0 {
				return Call{}, Refuse(TTL, d)
			} else if d > 0 {
				c.TTL = d
			}
		case Retry:
			if r := o.retry(); r != (acquire.Retry{}) {
				if !(r.Min > 0 && r.Min <= r.Max) {
					return Call{}, Refuse(Retry, retryValue(r))
				}
				c.Retry = r
			}
		case AutoRenew:
			c.AutoRenew = o.on()
		case Metadata:
			if len(o.s) > lease.MaxMetadata {
				return Call{}, Refuse(Metadata, fmt.Sprintf("%d bytes", len(o.s)))
			}
			c.Metadata = o.s
		}
	}
	if c.TTL != l.TTL {
		return c, l.CheckTTL(c.TTL)
	}
	return c, nil
}
