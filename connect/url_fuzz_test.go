package connect

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

// FuzzParseURL checks that any string either parses into a Config that
// Open accepts, or is refused with an *lease.ArgError for the url or for
// one of the settings, whose message hides the passwords; and that a
// parsed Config written back as a URL (formatURL) parses into the same
// Config.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6380", "redis://localhost", "redis://[::1]:7000/2", "redis://[::1]",
		"redis://u:p%40ss@h:1/3?ttl=5s&client=valkey-go&dial_timeout=2s", "redis://:secret@h:1",
		"quorum://a:1,b:2,c", "quorum://a:1,b:2,c:3?durable=true&node_timeout=20ms",
		"quorum://a:1,b:2,c:3?ttl=10s&max_ttl=1m&durable=0", "quorum://a:1,b:2,c:3?idle_ttl=forever",
		"redis://h:1?idle_ttl=1h", "rediss://h", "quorums://a:1,b:2,c?tls_server_name=redis.internal",
		"redis+sentinel://u:p@s1/my%20master/2?sentinel_username=su&sentinel_password=sp&replicas=1&replica_timeout=50ms",
		"redis+cluster://n1:7000,n2:7001?ttl=5s", "rediss+cluster://n1",
		"redis://h:1?ttl=-5s", "redis://h:1?ttl=1ns", "redis://h:1?dial_timeout=-1s", "redis://h:1?client=x",
		"quorum://a:1,a:1,b:2", "redis://a:1,b:2", "quorum://a,b,c?node_timeout=20s",
		"quorum://a,b,c?max_ttl=1s&ttl=10s", "redis://h:1?replicas=1", "redis://h:1?replica_timeout=1s",
		"redis://h:0", "redis://h:65536", "redis://h:-1", "redis:///", "redis://@", "redis://%zz@h",
		"redis://h:1/99999999999999999999", "redis://h:1?ttl=9223372036854775807ns",
		"redis+sentinel://s/%zz", "redis://h:1?a=%zz", "redis://[::1", "redis://]:1", "redis://h:1#frag",
		"redis://user:hunter2@h:1?color=red", "redis+sentinel://s1/m?sentinel_password=hunter2&color=red",
		"redis://h:1?replicas=9223372036854775808", "redis://h:1?durable=true",
		"quorums://a,b,c?tls_cert=/nonexistent/c.pem",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := ParseURL(raw)
		if err != nil {
			var ae *lease.ArgError
			if !errors.As(err, &ae) || ae.Arg != "url" && settings.Named(ae.Arg) == nil || !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("ParseURL(%q) = %v; want an *ArgError for url or a setting", raw, err)
			}
			// The same text may be written elsewhere in the URL (a host
			// of the same digits): what must not show it is that the
			// error is the one the URL gets with its password replaced.
			if pw, hide := password(raw); pw != "" {
				// A bad escape is refused as one: keep it one.
				other := "xxxxx"
				if _, err := url.PathUnescape(pw); err != nil {
					other = "%zz"
				}
				_, herr := ParseURL(hide(other))
				if herr == nil || herr.Error() != err.Error() {
					t.Fatalf("ParseURL(%q) = %v, but %v with the password replaced: shows it", raw, err, herr)
				}
			}
			return
		}
		if err := cfg.Check(); err != nil {
			t.Fatalf("ParseURL(%q) = %+v, which Open refuses: %v", raw, cfg, err)
		}
		if cfg.TLS != nil {
			return // the TLS parameters name files: no round trip
		}
		back := formatURL(cfg)
		again, err := ParseURL(back)
		if err != nil {
			t.Fatalf("ParseURL(%q) = %+v, written back as %q, which fails: %v", raw, cfg, back, err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("ParseURL(%q) = %+v, written back as %q, which parses as %+v", raw, cfg, back, again)
		}
	})
}

// password returns the password of raw's user part, as written, found
// as ParseURL finds it: before the query, then before the path; and hide,
// which returns raw with other in its place.
func password(raw string) (pw string, hide func(other string) string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	hosts := rest
	if i := strings.IndexByte(hosts, '?'); i >= 0 {
		hosts = hosts[:i]
	}
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts = hosts[:i]
	}
	at := strings.LastIndex(hosts, "@")
	colon := strings.IndexByte(hosts[:max(at, 0)], ':')
	if !ok || at < 0 || colon < 0 {
		return "", nil
	}
	return hosts[colon+1 : at], func(other string) string { return scheme + "://" + rest[:colon+1] + other + rest[at:] }
}

// formatURL writes cfg, a Config without TLS, as a URL.
func formatURL(cfg Config) string {
	var b strings.Builder
	switch {
	case cfg.Strategy == StrategyQuorum:
		b.WriteString("quorum://")
	case cfg.Cluster:
		b.WriteString("redis+cluster://")
	case cfg.SentinelMaster != "":
		b.WriteString("redis+sentinel://")
	default:
		b.WriteString("redis://")
	}
	if cfg.Username != "" || cfg.Password != "" {
		b.WriteString(escape(cfg.Username) + ":" + escape(cfg.Password) + "@")
	}
	b.WriteString(strings.Join(cfg.Addrs, ","))
	if cfg.SentinelMaster != "" {
		b.WriteString("/" + escape(cfg.SentinelMaster))
	}
	if cfg.DB != 0 {
		b.WriteString("/" + strconv.Itoa(cfg.DB))
	}
	var q []string
	for i := range settings.Table {
		st := &settings.Table[i]
		if st.Layers&settings.InURL != 0 && !st.Field(&cfg).IsZero() {
			q = append(q, st.Param+"="+escape(st.Format(st.Get(&cfg))))
		}
	}
	if len(q) > 0 {
		b.WriteString("?" + strings.Join(q, "&"))
	}
	return b.String()
}

// escape percent-encodes every byte of s but letters and digits.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&15, 16))
		}
	}
	return b.String()
}
