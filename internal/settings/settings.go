// Package settings describes every setting of dlock's Lockers, primitives
// and calls, and of the clients Open makes, once (Table: name, type,
// where its option applies, where else it appears: connect.Config's
// field, the URL parameter, the command's flag and config file key; its
// default, its rule, its text form) and resolves the options a
// constructor or a call was given against it, in one place: New for a
// constructor, Locker.Call for a call. Package option is how users name
// them in code; connect.Config, connect.ParseURL and cmd/dlock read and
// check them through Setting's methods, by a loop over Table.
// TestSettingsEveryLayer, in cmd/dlock (which alone sees the command's
// flags), holds every layer to Table.
package settings

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

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
	KindRetry  // two durations, min..max
	KindSecret // a string no error shows
)

// GoType returns the Go type of a Kind's values, as connect.Config's
// fields have it; nil for KindRetry, which is two values.
func (k Kind) GoType() reflect.Type {
	switch k {
	case KindDuration:
		return reflect.TypeFor[time.Duration]()
	case KindInt:
		return reflect.TypeFor[int]()
	case KindFloat:
		return reflect.TypeFor[float64]()
	case KindBool:
		return reflect.TypeFor[bool]()
	case KindString, KindSecret:
		return reflect.TypeFor[string]()
	case KindObserver:
		return reflect.TypeFor[observe.Observer]()
	}
	return nil
}

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

// Layer is a set of the places, beside its option, where a setting
// appears.
type Layer uint8

const (
	// InConfig: a field of connect.Config (dlock.Config) named Name, of
	// Kind's GoType.
	InConfig Layer = 1 << iota
	// InURL: the URL parameter Param (connect.ParseURL).
	InURL
	// InFlag: the flag Flag() of each of the command's subcommands that
	// reach servers (cmd/dlock).
	InFlag
	// InFile: the key Param of the command's --config file.
	InFile
)

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
	// The connection settings: connect.Config's, for the clients Open
	// makes. No option sets them.
	Client
	Username
	Password
	DB
	DialTimeout
	SentinelUsername
	SentinelPassword
)

// Setting is one setting, as every layer shows it.
type Setting struct {
	ID   ID
	Name string // the option's name, and Config's field: "TTL", "NodeTimeout"
	// Param names it in the URL's query, the config file and, with '-'
	// for '_', the command's flags (see Layers): "ttl", "node_timeout";
	// "" for none.
	Param   string
	Kind    Kind
	Scopes  Scope  // where its option applies; 0 for a connection setting, which no option sets
	Layers  Layer  // where else it appears
	Default string // as the docs and the flags print it
	Rule    string // the *lease.ArgError's rule for a bad value; "" when every value is good
	Doc     string // one line, for the package docs and the flags' usage

	valid   func(v any) bool // its own rule, the cross rules aside (see New); nil: every value is
	forever bool             // "forever" is its text for a negative duration, for ever
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
	// DefaultDialTimeout bounds each connection attempt of the clients
	// Open makes; both client libraries' own default.
	DefaultDialTimeout = 5 * time.Second
)

// DefaultRetry is the pace of a blocking acquire by default.
var DefaultRetry = Pace{Min: DefaultRetryMin, Max: DefaultRetryMax}

// The Layers of a setting that Open's Config, URLs, the command's flags
// and its config file all carry.
const everywhere = InConfig | InURL | InFlag | InFile

// Table is every setting, in ID order.
var Table = []Setting{
	{ID: TTL, Name: "TTL", Param: "ttl", Kind: KindDuration, Scopes: Lockers | Election | Calls, Layers: everywhere,
		Default: "30s",
		Rule: "must be >= 0 (0: the default) and above twice the drift margin (TTL × DriftFactor + 2ms); " +
			"on a quorum also above twice NodeTimeout, at most MaxTTL unless DurableNodes, " +
			"and with IdleTTL and the sit-out within a time.Duration",
		Doc:   "how long a lease lives without an extension; a call's, an election's and a resumed lease's default is the Locker's",
		valid: func(v any) bool { return v.(time.Duration) >= 0 }},
	{ID: IdleTTL, Name: "IdleTTL", Param: "idle_ttl", Kind: KindDuration, Scopes: Lockers, Layers: everywhere,
		Default: "1m",
		Doc:     "how long a key's fence counter outlives its last lease; < 0 (forever): for ever",
		forever: true},
	{ID: Retry, Name: "Retry", Kind: KindRetry, Scopes: Lockers | Election | Calls, Default: "5ms..200ms",
		Rule: "must be 0, 0 (the default) or have 0 < min <= max",
		Doc:  "the pace of a blocking acquire, backoff from min to max; a call's and an election's default is the Locker's",
		valid: func(v any) bool {
			r := v.(Pace)
			return r == Pace{} || r.Min > 0 && r.Min <= r.Max
		}},
	{ID: DriftFactor, Name: "DriftFactor", Param: "drift_factor", Kind: KindFloat, Scopes: Lockers, Layers: everywhere,
		Default: "0.01", Rule: "must be in [0, 0.5) (0: the default)",
		Doc:   "the share of the TTL set aside for clock drift, on top of 2ms",
		valid: func(v any) bool { f := v.(float64); return f >= 0 && f < 0.5 }},
	{ID: Observer, Name: "Observer", Kind: KindObserver, Scopes: Lockers | RateLimit | Election, Layers: InConfig,
		Default: "none",
		Doc:     "hears acquisitions, votes, renewals, losses and releases; must not block"},
	{ID: AutoRenew, Name: "AutoRenew", Kind: KindBool, Scopes: Calls, Default: "off",
		Doc: "renews the lease in the background until Release, or until a renewal is refused"},
	{ID: Metadata, Name: "Metadata", Kind: KindString, Scopes: Calls, Default: "none",
		Rule:  "must be at most " + strconv.Itoa(lease.MaxMetadata) + " bytes (lease.MaxMetadata)",
		Doc:   "stored with the lock while it is held, for Inspect: who holds it",
		valid: func(v any) bool { return len(v.(string)) <= lease.MaxMetadata }},
	{ID: Replicas, Name: "Replicas", Param: "replicas", Kind: KindInt, Scopes: Single, Layers: everywhere,
		Default: "0", Rule: "must be >= 0",
		Doc:   "on the single strategy, how many replicas must acknowledge each claim; 0: none",
		valid: func(v any) bool { return v.(int) >= 0 }},
	{ID: ReplicaTimeout, Name: "ReplicaTimeout", Param: "replica_timeout", Kind: KindDuration, Scopes: Single, Layers: everywhere,
		Default: "0", Rule: "must be > 0 when Replicas is, and 0 when it is not",
		Doc: "how long a claim waits for its replicas' acknowledgements"},
	{ID: DurableNodes, Name: "DurableNodes", Param: "durable", Kind: KindBool, Scopes: Quorum, Layers: everywhere,
		Default: "off",
		Doc:     "declares that no node of a quorum loses an acknowledged write: the lost-data guard off"},
	{ID: NodeTimeout, Name: "NodeTimeout", Param: "node_timeout", Kind: KindDuration, Scopes: Quorum | RateLimit, Layers: everywhere,
		Default: "max(50ms, TTL/50) on a quorum; 100ms for a rate limit on several nodes, none on one",
		Rule:    "must be >= 0 (0: the default) and, on a quorum, below half the TTL",
		Doc:     "bounds each call to one node of a quorum or a rate limiter",
		valid:   func(v any) bool { return v.(time.Duration) >= 0 }},
	{ID: MaxTTL, Name: "MaxTTL", Param: "max_ttl", Kind: KindDuration, Scopes: Quorum, Layers: everywhere,
		Default: "the TTL",
		Rule: "must be >= 0 (0: the TTL), at least the TTL unless DurableNodes, " +
			"and with NodeTimeout and the drift margin within a time.Duration (the sit-out)",
		Doc:   "how long a node of a quorum that lost its data sits out",
		valid: func(v any) bool { return v.(time.Duration) >= 0 }},
	{ID: Tokens, Name: "Tokens", Kind: KindBool, Scopes: Quorum, Default: "on",
		Doc: "fencing tokens; off is plain one-phase Redlock"},
	{ID: KeepDone, Name: "KeepDone", Kind: KindDuration, Scopes: Claims, Default: "1m",
		Rule:  "must be 0 (the default) or at least 1ms",
		Doc:   "how long a completed item's record is kept",
		valid: func(v any) bool { d := v.(time.Duration); return d == 0 || d >= time.Millisecond }},

	{ID: Client, Name: "Client", Param: "client", Kind: KindString, Layers: everywhere,
		Default: "go-redis", Rule: `must be "go-redis" or "valkey-go" (empty: go-redis), and empty with Nodes`,
		Doc: "the client library: go-redis or valkey-go",
		valid: func(v any) bool {
			switch v.(string) {
			case "", "go-redis", "valkey-go":
				return true
			}
			return false
		}},
	{ID: Username, Name: "Username", Param: "username", Kind: KindString, Layers: InConfig | InFile,
		Default: "none", Rule: "must be empty with Nodes",
		Doc: "the user every server is authenticated as (AUTH)"},
	{ID: Password, Name: "Password", Param: "password", Kind: KindSecret, Layers: InConfig | InFile,
		Default: "none", Rule: "must be empty with Nodes",
		Doc: "the password every server is authenticated with (AUTH)"},
	{ID: DB, Name: "DB", Param: "db", Kind: KindInt, Layers: InConfig | InFlag | InFile,
		Default: "0", Rule: "must be >= 0, and 0 on a cluster or with Nodes",
		Doc:   "the database every server selects",
		valid: func(v any) bool { return v.(int) >= 0 }},
	{ID: DialTimeout, Name: "DialTimeout", Param: "dial_timeout", Kind: KindDuration, Layers: everywhere,
		Default: "5s", Rule: "must be >= 0 (0: the default), and 0 with Nodes",
		Doc:   "bounds each connection attempt",
		valid: func(v any) bool { return v.(time.Duration) >= 0 }},
	{ID: SentinelUsername, Name: "SentinelUsername", Param: "sentinel_username", Kind: KindString, Layers: InConfig | InURL | InFile,
		Default: "none", Rule: "needs SentinelMaster (a redis+sentinel:// URL), and must be empty with Nodes",
		Doc: "the user the Sentinels are authenticated as"},
	{ID: SentinelPassword, Name: "SentinelPassword", Param: "sentinel_password", Kind: KindSecret, Layers: InConfig | InURL | InFile,
		Default: "none", Rule: "needs SentinelMaster (a redis+sentinel:// URL), and must be empty with Nodes",
		Doc: "the password the Sentinels are authenticated with"},
}

// Of returns id's Setting.
func Of(id ID) *Setting { return &Table[id-1] }

// Named returns the Setting called name, or nil.
func Named(name string) *Setting {
	for i := range Table {
		if Table[i].Name == name {
			return &Table[i]
		}
	}
	return nil
}

// Flag returns the name of s's flag: Param with '-' for '_'.
func (s *Setting) Flag() string { return strings.ReplaceAll(s.Param, "_", "-") }

// Syntax returns the rule of a text that is not a value of s's Kind.
func (s *Setting) Syntax() string {
	switch s.Kind {
	case KindDuration:
		if s.forever {
			return "must be a duration such as 30s, or forever"
		}
		return "must be a duration such as 30s"
	case KindInt:
		return "must be a whole number such as 1"
	case KindFloat:
		return "must be a number such as 0.01"
	case KindBool:
		return "must be true or false"
	}
	return "has no text form"
}

// Parse reads text as a value of s, of its Kind's GoType, as a URL
// parameter, a flag and a config file's line all read it: an
// *lease.ArgError naming s for a text that is not a value of its Kind
// (Syntax), or for a value s's own rule refuses (Rule; the cross rules
// are the Config's, see New).
func (s *Setting) Parse(text string) (any, error) {
	var (
		v   any
		err error
	)
	switch s.Kind {
	case KindDuration:
		var d time.Duration
		if s.forever && text == "forever" {
			d = -1
		} else if d, err = time.ParseDuration(text); s.forever && d < 0 {
			d = -1 // every negative value is for ever; one text writes it
		}
		v = d
	case KindInt:
		v, err = strconv.Atoi(text)
	case KindFloat:
		v, err = strconv.ParseFloat(text, 64)
	case KindBool:
		v, err = strconv.ParseBool(text)
	case KindString, KindSecret:
		v = text
	default:
		err = strconv.ErrSyntax
	}
	if err != nil {
		return nil, &argerr.Error{Arg: s.Name, Value: s.shown(text), Rule: s.Syntax()}
	}
	return v, s.Check(v)
}

// Format writes v, a value of s, as Parse reads it.
func (s *Setting) Format(v any) string {
	switch v := v.(type) {
	case time.Duration:
		if s.forever && v < 0 {
			return "forever"
		}
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// Check returns s's *lease.ArgError unless v, a value of s, keeps s's own
// rule; the cross rules (the TTL against the node timeout, replicas and
// their timeout together, a connection setting with Nodes) are the
// resolution's (New) and the Config's.
func (s *Setting) Check(v any) error {
	if s.valid != nil && !s.valid(v) {
		return s.Refuse(v)
	}
	return nil
}

// Refuse returns s's *lease.ArgError for v: its Name, v (hidden for a
// secret) and its Rule.
func (s *Setting) Refuse(v any) error {
	return &argerr.Error{Arg: s.Name, Value: s.shown(v), Rule: s.Rule}
}

// shown is v as an *lease.ArgError shows it.
func (s *Setting) shown(v any) any {
	switch {
	case s.Kind == KindSecret:
		return "xxxxx"
	case s.Kind == KindRetry:
		if r, ok := v.(Pace); ok {
			return retryValue(r)
		}
	}
	return v
}

// Field returns s's field of cfg, a pointer to a struct with a field named
// after each setting it holds (connect.Config): its value, settable, or
// the zero Value when cfg has no field of that name.
func (s *Setting) Field(cfg any) reflect.Value {
	return reflect.ValueOf(cfg).Elem().FieldByName(s.Name)
}

// Get returns the value of s's field of cfg (see Field).
func (s *Setting) Get(cfg any) any { return s.Field(cfg).Interface() }

// Set sets s's field of cfg (see Field) to v, a value of s.
func (s *Setting) Set(cfg any, v any) { s.Field(cfg).Set(reflect.ValueOf(v)) }

// Options returns the Options of the settings cfg holds (see Field) that
// apply somewhere (Scopes) and are not zero, in Table order: what cfg
// says to a constructor. New refuses those that do not apply to its
// scope, as it refuses them from a caller; OptionsFor leaves them out.
func Options(cfg any) []Option { return OptionsFor(cfg, ^Scope(0)) }

// OptionsFor returns the Options of Options(cfg) that apply to scope.
func OptionsFor(cfg any, scope Scope) []Option {
	var opts []Option
	for i := range Table {
		s := &Table[i]
		if s.Scopes&scope == 0 || s.Layers&InConfig == 0 || s.ID == ReplicaTimeout {
			continue
		}
		f := s.Field(cfg)
		if s.ID == Replicas {
			// One option carries both: so does the Config's pair.
			t := Of(ReplicaTimeout).Field(cfg)
			if !f.IsZero() || !t.IsZero() {
				opts = append(opts, OfReplicas(int(f.Int()), time.Duration(t.Int())))
			}
			continue
		}
		if !f.IsZero() {
			opts = append(opts, of(s, f.Interface()))
		}
	}
	return opts
}

// of returns the Option that sets s to v, a value of s.
func of(s *Setting, v any) Option {
	switch v := v.(type) {
	case time.Duration:
		return OfDuration(s.ID, v)
	case float64:
		return OfFloat(s.ID, v)
	case bool:
		return OfBool(s.ID, v)
	case string:
		return OfString(s.ID, v)
	case observe.Observer:
		return OfObserver(v)
	}
	panic("settings: no option of " + s.Name)
}

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
func (o Option) retry() Pace {
	return Pace{Min: time.Duration(o.a), Max: time.Duration(o.b)}
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

// val is o's value as a value of its setting: Replicas' is its count.
func (o Option) val() any {
	switch Of(o.id).Kind {
	case KindDuration:
		return o.d()
	case KindFloat:
		return o.f()
	case KindBool:
		return o.on()
	case KindInt:
		return int(o.a)
	case KindString:
		return o.s
	case KindObserver:
		return o.o
	case KindRetry:
		return o.retry()
	}
	return nil
}

func retryValue(r Pace) string { return r.Min.String() + ".." + r.Max.String() }

// Refuse returns the *lease.ArgError of id with value v: its Rule.
func Refuse(id ID, v any) error { return Of(id).Refuse(v) }

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
	Retry          Pace
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
	var given [KeepDone + 1]Option
	for _, o := range opts {
		if o.id == 0 {
			continue
		}
		if err := o.applies(scope); err != nil {
			return Locker{}, err
		}
		given[o.id] = o
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
	// Each setting's own rule, on the value that stands (a later option
	// overrides an earlier one), in Table order.
	for _, o := range given {
		if o.id != 0 && Of(o.id).valid != nil {
			if err := Of(o.id).Check(o.val()); err != nil {
				return Locker{}, err
			}
		}
	}
	if l.Replicas > 0 && l.ReplicaTimeout <= 0 || l.Replicas == 0 && l.ReplicaTimeout != 0 {
		// WAIT with timeout 0 blocks for ever.
		return Locker{}, Refuse(ReplicaTimeout, l.ReplicaTimeout)
	}
	l.Reporter = Reporter(l.Observer)
	if scope&Lockers == 0 {
		return l, nil
	}
	if l.TTL == 0 {
		l.TTL = DefaultTTL
	}
	if l.IdleTTL == 0 {
		l.IdleTTL = DefaultIdleTTL
	}
	if l.Retry == (Pace{}) {
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
		if given[NodeTimeout].id != 0 && l.NodeTimeout >= l.TTL/2 {
			return Locker{}, Refuse(NodeTimeout, l.NodeTimeout)
		}
		if given[MaxTTL].id != 0 && l.MaxTTL != 0 && !l.Durable && l.MaxTTL < l.TTL {
			return Locker{}, Refuse(MaxTTL, l.MaxTTL)
		}
		if l.MaxTTL == 0 {
			l.MaxTTL = l.TTL
		}
		if !SumFits(l.MaxTTL, l.NodeTimeoutFor(l.MaxTTL), Drift(l.MaxTTL, l.Drift)) {
			if given[MaxTTL].id != 0 && l.MaxTTL != l.TTL {
				return Locker{}, Refuse(MaxTTL, l.MaxTTL)
			}
			return Locker{}, Refuse(TTL, l.TTL)
		}
	}
	return l, l.CheckTTL(l.TTL)
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
	d := Drift(ttl, l.Drift)
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
	Retry     Pace
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
			if r := o.retry(); r != (Pace{}) {
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
