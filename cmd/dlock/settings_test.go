package main

import (
	"bytes"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// The parts of the layers that are not settings of the table: connect's
// own fields, which say where the servers are (the URL says them by its
// scheme, hosts and path); the flags that say the same, or give a
// command's arguments.
var (
	configOwn = []string{"Strategy", "Addrs", "Nodes", "TLS", "Cluster", "SentinelMaster"}
	flagsOwn  = []string{"url", "addrs", "strategy", "config", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name",
		"key", "keys", "wait", "grace", "v", "metadata", "permits", "shared", "exclusive", "rate", "burst",
		"name", "value", "handle", "force", "timeout", "embedded"}
)

// settingCases are, per setting with a text form, a good text, what else
// a URL, a file or a command line needs to take it, and a bad value its
// rule refuses ("" when every value of its kind is good).
var settingCases = map[string]struct {
	good, bad string
	place     string   // "single", "quorum" or "sentinel": where it applies
	with      []string // companion settings, param=text
}{
	"TTL":              {good: "1m", bad: "-1s"},
	"IdleTTL":          {good: "2h"},
	"DriftFactor":      {good: "0.02", bad: "0.5"},
	"Replicas":         {good: "1", bad: "-1", with: []string{"replica_timeout=1s"}},
	"ReplicaTimeout":   {good: "1s", with: []string{"replicas=1"}},
	"DurableNodes":     {good: "true", place: "quorum"},
	"NodeTimeout":      {good: "100ms", bad: "-1ms", place: "quorum"},
	"MaxTTL":           {good: "1m", bad: "-1m", place: "quorum"},
	"Client":           {good: "valkey-go", bad: "jedis"},
	"Username":         {good: "u"},
	"Password":         {good: "p"},
	"DB":               {good: "2", bad: "-1"},
	"DialTimeout":      {good: "3s", bad: "-1s"},
	"SentinelUsername": {good: "su", place: "sentinel"},
	"SentinelPassword": {good: "sp", place: "sentinel"},
}

// optionOf returns the option function named name given v, a value of
// its setting; nil for a name no option function has.
func optionOf(name string, v any) option.Option {
	switch name {
	case "TTL":
		return option.TTL(v.(time.Duration))
	case "IdleTTL":
		return option.IdleTTL(v.(time.Duration))
	case "DriftFactor":
		return option.DriftFactor(v.(float64))
	case "Replicas":
		return option.Replicas(v.(int), time.Second)
	case "DurableNodes":
		return option.DurableNodes(v.(bool))
	case "NodeTimeout":
		return option.NodeTimeout(v.(time.Duration))
	case "MaxTTL":
		return option.MaxTTL(v.(time.Duration))
	}
	return option.Option{}
}

// subcommands are the subcommands that reach servers, by their usage.
var subcommands = map[string]func(args []string, stdout, stderr *bytes.Buffer) int{
	"run":     func(a []string, o, e *bytes.Buffer) int { return runMain(a, o, e) },
	"elect":   func(a []string, o, e *bytes.Buffer) int { return electMain(a, o, e) },
	"inspect": func(a []string, o, e *bytes.Buffer) int { return inspectMain(a, o, e) },
	"acquire": func(a []string, o, e *bytes.Buffer) int { return acquireMain(a, o, e) },
	"extend":  func(a []string, o, e *bytes.Buffer) int { return extendMain(a, o, e) },
	"release": func(a []string, o, e *bytes.Buffer) int { return releaseMain(a, o, e) },
	"demo":    func(a []string, o, e *bytes.Buffer) int { return demoMain(a, o, e) },
}

// TestSettingsEveryLayer holds connect.Config, connect.ParseURL, the
// command's flags and config file, and package option to the settings
// table: each setting is in exactly the layers the table says, under the
// table's name (the Config field and the option: Name; the URL parameter
// and the file's key: Param; the flag: Flag), of its type; a good text
// reads as the same value in each layer, a bad value is the same
// *lease.ArgError from each, a setting left unset is the table's Default
// everywhere; and no layer has a setting the table lacks.
func TestSettingsEveryLayer(t *testing.T) {
	optionFuncs := optionFuncNames(t)
	var fresh connFlags
	fs := flag.NewFlagSet("dlock", flag.ContinueOnError)
	fresh.register(fs)
	cfgType := reflect.TypeFor[connect.Config]()
	for i := range settings.Table {
		s := &settings.Table[i]
		t.Run(s.Name, func(t *testing.T) {
			// Config: a field named Name, of the Kind's type.
			f, ok := cfgType.FieldByName(s.Name)
			if inConfig := s.Layers&settings.InConfig != 0; ok != inConfig {
				t.Errorf("connect.Config has a field %s: %v; the table says %v", s.Name, ok, inConfig)
			} else if ok && f.Type != s.Kind.GoType() {
				t.Errorf("connect.Config.%s is a %v; the table says %v", s.Name, f.Type, s.Kind.GoType())
			}
			// Option: a function named Name, where it applies somewhere;
			// ReplicaTimeout is Replicas' second argument.
			if hasFunc, applies := slices.Contains(optionFuncs, s.Name), s.Scopes != 0 && s.ID != settings.ReplicaTimeout; hasFunc != applies {
				t.Errorf("option.%s exists: %v; the table's scopes (%v) say %v", s.Name, hasFunc, s.Scopes, applies)
			}
			// Flag: named Flag(), with the table's Doc and Default.
			fl := fs.Lookup(s.Flag())
			if inFlag := s.Layers&settings.InFlag != 0; s.Param != "" && (fl != nil) != inFlag || s.Param == "" && inFlag {
				t.Errorf("flag --%s registered: %v; the table says %v", s.Flag(), fl != nil, inFlag)
			} else if fl != nil && (fl.Usage != s.Doc || fl.DefValue != s.Default) {
				t.Errorf("--%s: usage %q, default %q; want the table's %q, %q", s.Flag(), fl.Usage, fl.DefValue, s.Doc, s.Default)
			}
			// Unset, the setting is its Default where the Default is a
			// value: in a call's resolution, and in the Config's.
			if def, err := s.Parse(s.Default); err == nil {
				checkDefault(t, s, def)
			}
			tc, ok := settingCases[s.Name]
			if s.Param == "" {
				if ok {
					t.Errorf("settingCases has %s, which has no text form", s.Name)
				}
				return
			}
			if !ok {
				t.Fatalf("settingCases lacks %s: give it a good text", s.Name)
			}
			want, err := s.Parse(tc.good)
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tc.good, err)
			}
			for layer, read := range readers(t, s, tc.place, tc.with) {
				cfg, err := read(tc.good)
				switch {
				case errors.Is(err, errAbsent):
				case err != nil:
					t.Errorf("%s %q: %v", layer, tc.good, err)
				case s.Get(&cfg) != want:
					t.Errorf("%s %q: Config.%s = %v; want %v", layer, tc.good, s.Name, s.Get(&cfg), want)
				}
			}
			if tc.bad == "" {
				return
			}
			v, wantErr := s.Parse(tc.bad)
			var ae *lease.ArgError
			if !errors.As(wantErr, &ae) || ae.Arg != s.Name || ae.Rule != s.Rule {
				t.Fatalf("Parse(%q) = %v; want the table's ArgError naming %s: %s", tc.bad, wantErr, s.Name, s.Rule)
			}
			for layer, read := range readers(t, s, tc.place, tc.with) {
				if _, err := read(tc.bad); !errors.Is(err, errAbsent) && (err == nil || !strings.HasSuffix(err.Error(), wantErr.Error())) {
					t.Errorf("%s %q: %v; want %v", layer, tc.bad, err, wantErr)
				}
			}
			if s.Layers&settings.InConfig != 0 {
				base := map[string]string{"": "redis://h:1", "quorum": "quorum://a:1,b:1,c:1", "sentinel": "redis+sentinel://s:1/m"}[tc.place]
				cfg, err := configWith(base, tc.with)
				if err != nil {
					t.Fatal(err)
				}
				s.Set(&cfg, v)
				if err := cfg.Check(); err == nil || err.Error() != wantErr.Error() {
					t.Errorf("Config.Check with %s %v: %v; want %v", s.Name, v, err, wantErr)
				}
			}
			if o := optionOf(s.Name, v); s.Scopes != 0 && settings.Yields(o) != nil {
				scope := s.Scopes & -s.Scopes // the first it applies to
				if _, err := settings.New(scope, []option.Option{o}); err == nil || err.Error() != wantErr.Error() {
					t.Errorf("option.%s(%v) to %v: %v; want %v", s.Name, v, scope, err, wantErr)
				}
			} else if s.Scopes != 0 {
				t.Errorf("optionOf lacks option.%s", s.Name)
			}
		})
	}

	// No layer has a setting the table lacks.
	for f := range cfgType.Fields() {
		if s := settings.Named(f.Name); (s == nil || s.Layers&settings.InConfig == 0) && !slices.Contains(configOwn, f.Name) {
			t.Errorf("connect.Config.%s is no setting of the table", f.Name)
		}
	}
	for _, name := range optionFuncs {
		if s := settings.Named(name); s == nil || s.Scopes == 0 {
			t.Errorf("option.%s is no setting of the table with an option", name)
		}
	}
	_, err := connect.ParseURL("redis://h:1?zz=1")
	var ae *lease.ArgError
	if !errors.As(err, &ae) || !strings.Contains(ae.Rule, "known: ") {
		t.Fatalf("ParseURL with an unknown parameter: %v", err)
	}
	var urlParams []string
	for _, s := range settings.Table {
		if s.Layers&settings.InURL != 0 {
			urlParams = append(urlParams, s.Param)
		}
	}
	if known := strings.TrimSuffix(strings.SplitN(ae.Rule, "known: ", 2)[1], ")"); known != strings.Join(urlParams, ", ") {
		t.Errorf("ParseURL knows the parameters %s; the table's are %s", known, strings.Join(urlParams, ", "))
	}
	flagRE := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for name, main := range subcommands {
		var stdout, stderr bytes.Buffer
		if code := main([]string{"--help"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s --help: exit %d", name, code)
		}
		var flags []string
		for _, m := range flagRE.FindAllStringSubmatch(stdout.String(), -1) {
			flags = append(flags, m[1])
		}
		for _, fl := range flags {
			if s := flagSetting(fl); s == nil && !slices.Contains(flagsOwn, fl) {
				t.Errorf("dlock %s --%s is no setting of the table", name, fl)
			}
		}
		for _, s := range settings.Table {
			has := slices.Contains(flags, s.Flag())
			switch want := s.Layers&settings.InFlag != 0; {
			case name == "demo" && has != (s.ID == settings.Client):
				t.Errorf("dlock demo --%s: %v; demo takes --client only", s.Flag(), has)
			case name != "demo" && s.Param != "" && has != want:
				t.Errorf("dlock %s --%s: %v; the table says %v", name, s.Flag(), has, want)
			}
		}
	}
}

// errAbsent is a reader's error for a setting its layer has not.
var errAbsent = errors.New("not in this layer")

// readers return, per layer, a reader of s's text: the Config a URL
// parameter, the command's flag, the config file's key and a Config's
// field set from the text give, with what place and with need. A reader of
// a layer the table says s is not in checks that the layer refuses it
// as unknown, then returns errAbsent.
func readers(t *testing.T, s *settings.Setting, place string, with []string) map[string]func(text string) (connect.Config, error) {
	t.Helper()
	base := map[string]string{"": "redis://h:1", "quorum": "quorum://a:1,b:1,c:1", "sentinel": "redis+sentinel://s:1/m"}[place]
	dir := t.TempDir()
	return map[string]func(string) (connect.Config, error){
		"URL": func(text string) (connect.Config, error) {
			cfg, err := connect.ParseURL(base + "?" + strings.Join(append([]string{s.Param + "=" + text}, with...), "&"))
			if s.Layers&settings.InURL != 0 {
				return cfg, err
			}
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != "url" || !strings.Contains(ae.Rule, "unknown parameter") {
				t.Errorf("URL parameter %s: %v; want it unknown", s.Param, err)
			}
			return cfg, errAbsent
		},
		"flag": func(text string) (connect.Config, error) {
			var c connFlags
			fs := flag.NewFlagSet("dlock", flag.ContinueOnError)
			fs.SetOutput(new(bytes.Buffer))
			c.register(fs)
			c.url = base
			args := []string{"--" + s.Flag() + "=" + text}
			for _, w := range with {
				k, v, _ := strings.Cut(w, "=")
				args = append(args, "--"+strings.ReplaceAll(k, "_", "-")+"="+v)
			}
			err := fs.Parse(args)
			if s.Layers&settings.InFlag == 0 {
				if err == nil || !strings.Contains(err.Error(), "not defined") {
					t.Errorf("flag --%s: %v; want it not defined", s.Flag(), err)
				}
				return connect.Config{}, errAbsent
			}
			if err != nil {
				return connect.Config{}, err
			}
			cfg, _, err := c.resolve(func(string) string { return "" })
			return cfg, err
		},
		"file": func(text string) (connect.Config, error) {
			p := filepath.Join(dir, "dlock.conf")
			body := "url = " + base + "\n" + s.Param + " = " + text + "\n"
			for _, w := range with {
				k, v, _ := strings.Cut(w, "=")
				body += k + " = " + v + "\n"
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := readConfigFile(p)
			if s.Layers&settings.InFile != 0 {
				return cfg, err
			}
			if err == nil || !strings.Contains(err.Error(), "unknown key") {
				t.Errorf("file key %s: %v; want it unknown", s.Param, err)
			}
			return cfg, errAbsent
		},
		"Config": func(text string) (connect.Config, error) {
			if s.Layers&settings.InConfig == 0 {
				return connect.Config{}, errAbsent
			}
			cfg, err := configWith(base, with)
			if err != nil {
				return cfg, err
			}
			v, err := s.Parse(text)
			if err != nil {
				return cfg, err
			}
			s.Set(&cfg, v)
			return cfg, cfg.Check()
		},
	}
}

// configWith returns the Config of the URL base with the settings with
// (param=text) set, unchecked.
func configWith(base string, with []string) (connect.Config, error) {
	cfg, err := connect.ParseURL(base)
	for _, w := range with {
		k, text, _ := strings.Cut(w, "=")
		s := &settings.Table[slices.IndexFunc(settings.Table, func(s settings.Setting) bool { return s.Param == k })]
		v, err := s.Parse(text)
		if err != nil {
			return cfg, err
		}
		s.Set(&cfg, v)
	}
	return cfg, err
}

// checkDefault checks that s, left unset, is def: in the resolution of
// the first constructor it applies to (an option left out), and in the
// clients a Config with the field zero makes.
func checkDefault(t *testing.T, s *settings.Setting, def any) {
	t.Helper()
	if s.Layers&settings.InConfig != 0 {
		var cfg connect.Config
		if !s.Field(&cfg).IsZero() || len(settings.Options(&cfg)) != 0 {
			t.Errorf("a zero Config gives options %v; want none, so that each setting is its default", settings.Options(&cfg))
		}
	}
	switch s.ID {
	case settings.Client:
		if def != connect.ClientGoRedis {
			t.Errorf("Client's default %v; connect's is %v", def, connect.ClientGoRedis)
		}
		return
	case settings.DialTimeout:
		if def != settings.DefaultDialTimeout {
			t.Errorf("DialTimeout's default %v; connect's is %v", def, settings.DefaultDialTimeout)
		}
		return
	}
	if s.Scopes&^settings.Calls == 0 {
		return
	}
	scope := s.Scopes & -s.Scopes
	l, err := settings.New(scope, nil)
	if err != nil {
		t.Fatal(err)
	}
	field := map[string]string{"DriftFactor": "Drift", "DurableNodes": "Durable"}[s.Name]
	if field == "" {
		field = s.Name
	}
	if got := reflect.ValueOf(l).FieldByName(field); !got.IsValid() || got.Interface() != def {
		t.Errorf("%s resolves, unset, to %v on %v; the table's default is %v", s.Name, got, scope, def)
	}
}

// flagSetting returns the setting whose flag is name, or nil.
func flagSetting(name string) *settings.Setting {
	for i := range settings.Table {
		if s := &settings.Table[i]; s.Param != "" && s.Flag() == name {
			return s
		}
	}
	return nil
}

// optionFuncNames returns the exported functions of package option.
func optionFuncNames(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "option", "option.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.IsExported() {
			names = append(names, fn.Name.Name)
		}
	}
	return names
}
