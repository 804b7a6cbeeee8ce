package option_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

// observer is an Observer for the options that take one.
type observer struct{}

func (observer) Observe(observe.Event) {}

// funcs are the option functions, each with a value that is good wherever
// its setting applies, and the zero value of its kind.
var funcs = []struct {
	name       string
	good, zero option.Option
}{
	{"TTL", option.TTL(10 * time.Second), option.TTL(0)},
	{"IdleTTL", option.IdleTTL(time.Hour), option.IdleTTL(0)},
	{"Retry", option.Retry(time.Millisecond, 2*time.Millisecond), option.Retry(0, 0)},
	{"DriftFactor", option.DriftFactor(0.1), option.DriftFactor(0)},
	{"Observer", option.Observer(observer{}), option.Observer(nil)},
	{"AutoRenew", option.AutoRenew(true), option.AutoRenew(false)},
	{"Metadata", option.Metadata("host=a"), option.Metadata("")},
	{"Replicas", option.Replicas(1, time.Second), option.Replicas(0, 0)},
	{"DurableNodes", option.DurableNodes(true), option.DurableNodes(false)},
	{"NodeTimeout", option.NodeTimeout(100 * time.Millisecond), option.NodeTimeout(0)},
	{"MaxTTL", option.MaxTTL(time.Minute), option.MaxTTL(0)},
	{"Tokens", option.Tokens(false), option.Tokens(true)},
	{"KeepDone", option.KeepDone(time.Second), option.KeepDone(0)},
}

// scopes are the places an option goes, each with its scope.
var scopes = []struct {
	name  string
	scope settings.Scope
}{
	{"single", settings.Single}, {"quorum", settings.Quorum}, {"permits", settings.Permits},
	{"claims", settings.Claims}, {"rwlock", settings.RWLock}, {"ratelimit", settings.RateLimit},
	{"election", settings.Election}, {"calls", settings.Calls},
}

// resolve gives opts to scope: to its constructor, or to a call on a
// single Locker of the defaults.
func resolve(t *testing.T, scope settings.Scope, opts ...option.Option) (settings.Locker, settings.Call, error) {
	t.Helper()
	if scope != settings.Calls {
		l, err := settings.New(scope, opts)
		return l, settings.Call{}, err
	}
	l, err := settings.New(settings.Single, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Call(opts)
	return l, c, err
}

// TestOptionsAreTheTable: every setting of the table has an option
// function that yields it, named after it (Replicas yields ReplicaTimeout
// too), and every exported function of package option is one of them.
func TestOptionsAreTheTable(t *testing.T) {
	yielded := map[settings.ID]string{}
	for _, f := range funcs {
		ids := settings.Yields(f.good)
		if len(ids) == 0 || settings.Of(ids[0]).Name != f.name {
			t.Errorf("option.%s yields %v; want its setting first", f.name, ids)
		}
		for _, id := range ids {
			yielded[id] = f.name
		}
		if z := settings.Yields(f.zero); !slices.Equal(z, ids) {
			t.Errorf("option.%s's zero value yields %v; want %v", f.name, z, ids)
		}
	}
	for i, s := range settings.Table {
		if s.ID != settings.ID(i+1) {
			t.Errorf("Table[%d] is %s with ID %d; want ID %d", i, s.Name, s.ID, i+1)
		}
		if connection := s.ID >= settings.Client; connection != (s.Scopes == 0) {
			t.Errorf("setting %s: scopes %v; want none exactly for the connection settings, from Client on", s.Name, s.Scopes)
		}
		if _, ok := yielded[s.ID]; !ok && s.Scopes != 0 {
			t.Errorf("setting %s: no option function yields it", s.Name)
		}
		if s.Default == "" || s.Doc == "" {
			t.Errorf("setting %s: default %q, doc %q; want each", s.Name, s.Default, s.Doc)
		}
	}
	if got := settings.Yields(option.Option{}); got != nil {
		t.Errorf("the zero Option yields %v; want nothing", got)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "option.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.IsExported() {
			if !slices.ContainsFunc(funcs, func(f struct {
				name       string
				good, zero option.Option
			}) bool {
				return f.name == fn.Name.Name
			}) {
				t.Errorf("option.%s is not in this test's list", fn.Name.Name)
			}
		}
	}
}

// TestScopes: each setting is accepted by each constructor or call it
// applies to and refused by every other with the "applies to" ArgError
// naming it.
func TestScopes(t *testing.T) {
	for _, f := range funcs {
		s := settings.Of(settings.Yields(f.good)[0])
		for _, sc := range scopes {
			_, _, err := resolve(t, sc.scope, f.good)
			if s.Scopes&sc.scope != 0 {
				if err != nil {
					t.Errorf("option.%s to %s: %v; want it taken", f.name, sc.name, err)
				}
				continue
			}
			var ae *lease.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, lease.ErrInvalid) || ae.Arg != s.Name || ae.Rule != "applies to "+s.Scopes.String() {
				t.Errorf("option.%s to %s: %v; want an ArgError naming %s, applies to %v", f.name, sc.name, err, s.Name, s.Scopes)
			}
		}
	}
}

// TestRules: each bad value is refused with its setting's Rule, the
// ArgError naming the setting; the rules with no bad value are empty.
func TestRules(t *testing.T) {
	ms := time.Millisecond
	long := strings.Repeat("x", lease.MaxMetadata+1)
	cases := []struct {
		name  string
		scope settings.Scope
		opts  []option.Option
		arg   string
	}{
		{"negative TTL", settings.Single, []option.Option{option.TTL(-1)}, "TTL"},
		{"negative TTL, election", settings.Election, []option.Option{option.TTL(-1)}, "TTL"},
		{"negative TTL, call", settings.Calls, []option.Option{option.TTL(-time.Second)}, "TTL"},
		{"TTL within the drift", settings.Permits, []option.Option{option.TTL(4 * ms)}, "TTL"},
		{"TTL within the drift, call", settings.Calls, []option.Option{option.TTL(3 * ms)}, "TTL"},
		{"TTL within the drift at 0.4", settings.Claims, []option.Option{option.DriftFactor(0.4), option.TTL(10 * ms)}, "TTL"},
		{"TTL within the default node timeout", settings.Quorum, []option.Option{option.TTL(100 * ms)}, "TTL"},
		{"TTL past the sit-out", settings.Quorum, []option.Option{option.TTL(math.MaxInt64 - time.Hour)}, "TTL"},
		{"TTL and IdleTTL past a Duration", settings.Quorum, []option.Option{option.TTL(math.MaxInt64 - time.Second), option.DurableNodes(true)}, "TTL"},
		{"retry min above max", settings.RWLock, []option.Option{option.Retry(2*ms, ms)}, "Retry"},
		{"retry without min", settings.Election, []option.Option{option.Retry(0, ms)}, "Retry"},
		{"retry negative, call", settings.Calls, []option.Option{option.Retry(-1, ms)}, "Retry"},
		{"drift factor 0.5", settings.Single, []option.Option{option.DriftFactor(0.5)}, "DriftFactor"},
		{"drift factor below 0", settings.Quorum, []option.Option{option.DriftFactor(-0.1)}, "DriftFactor"},
		{"metadata too long", settings.Calls, []option.Option{option.Metadata(long)}, "Metadata"},
		{"replicas below 0", settings.Single, []option.Option{option.Replicas(-1, time.Second)}, "Replicas"},
		{"replicas without a timeout", settings.Single, []option.Option{option.Replicas(1, 0)}, "ReplicaTimeout"},
		{"a timeout without replicas", settings.Single, []option.Option{option.Replicas(0, 5*time.Second)}, "ReplicaTimeout"},
		{"a negative timeout without replicas", settings.Single, []option.Option{option.Replicas(0, -time.Second)}, "ReplicaTimeout"},
		{"negative node timeout", settings.Quorum, []option.Option{option.NodeTimeout(-1)}, "NodeTimeout"},
		{"negative node timeout, rate limit", settings.RateLimit, []option.Option{option.NodeTimeout(-1)}, "NodeTimeout"},
		{"node timeout at half the TTL", settings.Quorum, []option.Option{option.TTL(time.Second), option.NodeTimeout(500 * ms)}, "NodeTimeout"},
		{"negative max TTL", settings.Quorum, []option.Option{option.MaxTTL(-1)}, "MaxTTL"},
		{"max TTL below the TTL", settings.Quorum, []option.Option{option.TTL(2 * time.Second), option.MaxTTL(time.Second)}, "MaxTTL"},
		{"max TTL past the sit-out", settings.Quorum, []option.Option{option.MaxTTL(math.MaxInt64)}, "MaxTTL"},
		{"negative keep done", settings.Claims, []option.Option{option.KeepDone(-1)}, "KeepDone"},
		{"keep done below 1ms", settings.Claims, []option.Option{option.KeepDone(time.Microsecond)}, "KeepDone"},
	}
	bad := map[string]bool{}
	for _, c := range cases {
		_, _, err := resolve(t, c.scope, c.opts...)
		i := slices.IndexFunc(settings.Table, func(s settings.Setting) bool { return s.Name == c.arg })
		if i < 0 {
			t.Fatalf("%s: no setting %s", c.name, c.arg)
		}
		s := settings.Table[i]
		bad[s.Name] = true
		var ae *lease.ArgError
		if !errors.As(err, &ae) || !errors.Is(err, lease.ErrInvalid) || ae.Arg != c.arg || ae.Rule != s.Rule {
			t.Errorf("%s: %v; want an ArgError naming %s: %s", c.name, err, c.arg, s.Rule)
		}
	}
	for _, s := range settings.Table {
		if s.Scopes == 0 {
			continue // connect's, which no option sets: cmd/dlock's TestSettingsEverywhere
		}
		if (s.Rule != "") != bad[s.Name] {
			t.Errorf("setting %s: rule %q, bad values tried %v; want a rule exactly when there are bad values", s.Name, s.Rule, bad[s.Name])
		}
	}
	// With the guard off, a max TTL below the TTL does not matter; zero
	// means the default, for the TTL too.
	for _, opts := range [][]option.Option{
		{option.TTL(2 * time.Second), option.MaxTTL(time.Second), option.DurableNodes(true)},
		{option.TTL(0), option.NodeTimeout(0), option.DriftFactor(0), option.Retry(0, 0), option.MaxTTL(0)},
	} {
		if _, err := settings.New(settings.Quorum, opts); err != nil {
			t.Errorf("quorum with %v: %v; want it taken", opts, err)
		}
	}
}

// TestDefaults: a zero value is the Default the table documents, in
// every scope it applies to; at a call, and in an election, zero TTL and
// Retry are the Locker's.
func TestDefaults(t *testing.T) {
	for _, f := range funcs {
		s := settings.Of(settings.Yields(f.zero)[0])
		for _, sc := range scopes {
			if s.Scopes&sc.scope == 0 {
				continue
			}
			l, c, err := resolve(t, sc.scope, f.zero)
			if err != nil {
				t.Errorf("option.%s's zero to %s: %v; want it taken", f.name, sc.name, err)
				continue
			}
			switch {
			case sc.scope == settings.Calls:
				if c.TTL != l.TTL || c.Retry != l.Retry || c.AutoRenew || c.Metadata != "" {
					t.Errorf("option.%s's zero to a call: %+v; want the Locker's TTL %v and retry %v", f.name, c, l.TTL, l.Retry)
				}
				continue
			case sc.scope == settings.Election && (s.ID == settings.TTL || s.ID == settings.Retry):
				if l.TTL != 0 || l.Retry != (settings.Pace{}) {
					t.Errorf("option.%s's zero to an election: TTL %v, retry %v; want zero, the Locker's", f.name, l.TTL, l.Retry)
				}
				continue
			}
			if got := printed(t, l, s.ID, sc.scope); got != s.Default {
				t.Errorf("option.%s's zero to %s: %s; want the default %s", f.name, sc.name, got, s.Default)
			}
		}
	}
}

// printed is the resolved value of setting id in l, as Default prints it.
func printed(t *testing.T, l settings.Locker, id settings.ID, scope settings.Scope) string {
	switch id {
	case settings.TTL:
		return short(l.TTL)
	case settings.IdleTTL:
		return short(l.IdleTTL)
	case settings.Retry:
		return short(l.Retry.Min) + ".." + short(l.Retry.Max)
	case settings.DriftFactor:
		return strconv.FormatFloat(l.Drift, 'g', -1, 64)
	case settings.Observer:
		if l.Observer == nil && l.Reporter == nil {
			return "none"
		}
	case settings.Replicas:
		return strconv.Itoa(l.Replicas)
	case settings.ReplicaTimeout:
		return short(l.ReplicaTimeout)
	case settings.DurableNodes:
		return onOff(l.Durable)
	case settings.Tokens:
		return onOff(l.Tokens)
	case settings.KeepDone:
		return short(l.KeepDone)
	case settings.MaxTTL:
		if l.MaxTTL == l.TTL {
			return "the TTL"
		}
	case settings.NodeTimeout:
		// The default depends on the TTL, or on the nodes: try both.
		quorum := l.NodeTimeoutFor(time.Second) == settings.QuorumNodeTimeout &&
			l.NodeTimeoutFor(time.Minute) == time.Minute/50 && settings.QuorumNodeTimeout > time.Second/50
		rate := l.RateNodeTimeout(3) == settings.RateNodeTimeout && l.RateNodeTimeout(1) == 0
		if scope == settings.Quorum && quorum || scope == settings.RateLimit && rate {
			return fmt.Sprintf("max(%s, TTL/50) on a quorum; %s for a rate limit on several nodes, none on one",
				short(settings.QuorumNodeTimeout), short(settings.RateNodeTimeout))
		}
	}
	return fmt.Sprintf("%+v", l)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// short writes d as the table does: 1m, not 1m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TestPackageDoc: the table in package option's doc is the table's,
// with each setting's URL parameter (and config file key; the flag is it
// with '-' for '_').
func TestPackageDoc(t *testing.T) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprint(w, "Setting\t")
	for _, sc := range scopes {
		fmt.Fprint(w, sc.name, "\t")
	}
	fmt.Fprintln(w, "Param\tDefault")
	for _, s := range settings.Table {
		if s.Scopes == 0 {
			continue
		}
		fmt.Fprint(w, s.Name, "\t")
		for _, sc := range scopes {
			if s.Scopes&sc.scope != 0 {
				fmt.Fprint(w, "x")
			}
			fmt.Fprint(w, "\t")
		}
		fmt.Fprintln(w, s.Param+"\t"+s.Default)
	}
	w.Flush()
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		want.WriteString("//\t" + strings.TrimRight(l, " ") + "\n")
	}
	src, err := parser.ParseFile(token.NewFileSet(), "option.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for _, c := range src.Doc.List {
		doc.WriteString(c.Text + "\n")
	}
	if !strings.Contains(doc.String(), want.String()) {
		t.Errorf("package option's doc does not hold the table; want:\n%s", want.String())
	}
}

// TestCallAllocs: a call's options cost no allocation to resolve.
func TestCallAllocs(t *testing.T) {
	l, err := settings.New(settings.Single, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c settings.Call
	n := testing.AllocsPerRun(100, func() {
		c, err = l.Call([]option.Option{option.TTL(10 * time.Second), option.AutoRenew(true), option.Metadata("host=a"),
			option.Retry(time.Millisecond, time.Second)})
	})
	if err != nil || n != 0 {
		t.Errorf("Call: %+v, %v, %v allocations; want none", c, err, n)
	}
}
