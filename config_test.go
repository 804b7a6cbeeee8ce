package dlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/internal/testkit/events"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want dlock.Config
	}{
		{"redis://127.0.0.1:6380", dlock.Config{Strategy: "single", Addrs: []string{"127.0.0.1:6380"}}},
		{"redis://localhost", dlock.Config{Strategy: "single", Addrs: []string{"localhost:6379"}}},
		{"redis://[::1]:7000/2", dlock.Config{Strategy: "single", Addrs: []string{"[::1]:7000"}, DB: 2}},
		{"redis://[::1]", dlock.Config{Strategy: "single", Addrs: []string{"[::1]:6379"}}},
		{"redis://u:p%40ss@h:1/3?ttl=5s&client=valkey-go&dial_timeout=2s", dlock.Config{
			Strategy: "single", Addrs: []string{"h:1"}, DB: 3, TTL: 5 * time.Second,
			Client: "valkey-go", Username: "u", Password: "p@ss", DialTimeout: 2 * time.Second}},
		{"redis://:secret@h:1", dlock.Config{Strategy: "single", Addrs: []string{"h:1"}, Password: "secret"}},
		{"quorum://a:1,b:2,c", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:6379"}}},
		{"quorum://a:1,b:2,c:3?ttl=10s", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:3"}, TTL: 10 * time.Second}},
		{"quorum://a:1,b:2,c:3?durable=true&node_timeout=20ms", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:3"},
			DurableNodes: true, NodeTimeout: 20 * time.Millisecond}},
		{"quorum://a:1,b:2,c:3?ttl=10s&max_ttl=1m&durable=0", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:3"},
			TTL: 10 * time.Second, MaxTTL: time.Minute}},
		{"redis://h:1?idle_ttl=1h", dlock.Config{Strategy: "single", Addrs: []string{"h:1"}, IdleTTL: time.Hour}},
		{"quorum://a:1,b:2,c:3?idle_ttl=forever", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:3"}, IdleTTL: -1}},
		// As Config and option.IdleTTL take it: any negative idle TTL is
		// for ever.
		{"redis://h:1?idle_ttl=-1h", dlock.Config{Strategy: "single", Addrs: []string{"h:1"}, IdleTTL: -1}},
		{"redis://h:1?drift_factor=0.05", dlock.Config{Strategy: "single", Addrs: []string{"h:1"}, DriftFactor: 0.05}},
		// The quorum's schemes before it took the strategy's name.
		{"redlock://a:1,b:2,c", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:6379"}}},
		{"redlocks://a:1,b:2,c", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:6379"}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}},
		{"rediss://h", dlock.Config{Strategy: "single", Addrs: []string{"h:6379"}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}},
		{"quorums://a:1,b:2,c?tls_server_name=redis.internal", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:2", "c:6379"},
			TLS: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "redis.internal"}}},
		{"redis+sentinel://s1,s2:5000,s3/mymaster", dlock.Config{Strategy: "single", Addrs: []string{"s1:26379", "s2:5000", "s3:26379"},
			SentinelMaster: "mymaster"}},
		{"redis+sentinel://u:p@s1/my%20master/2?sentinel_username=su&sentinel_password=sp&replicas=1&replica_timeout=50ms", dlock.Config{
			Strategy: "single", Addrs: []string{"s1:26379"}, SentinelMaster: "my master", DB: 2, Username: "u", Password: "p",
			SentinelUsername: "su", SentinelPassword: "sp", Replicas: 1, ReplicaTimeout: 50 * time.Millisecond}},
		{"rediss+sentinel://s1/m", dlock.Config{Strategy: "single", Addrs: []string{"s1:26379"}, SentinelMaster: "m",
			TLS: &tls.Config{MinVersion: tls.VersionTLS12}}},
		{"redis+cluster://n1:7000,n2:7001?ttl=5s", dlock.Config{Strategy: "single", Addrs: []string{"n1:7000", "n2:7001"}, Cluster: true,
			TTL: 5 * time.Second}},
		{"rediss+cluster://n1", dlock.Config{Strategy: "single", Addrs: []string{"n1:6379"}, Cluster: true,
			TLS: &tls.Config{MinVersion: tls.VersionTLS12}}},
	} {
		got, err := connect.ParseURL(tc.url)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, raw := range []string{
		"",
		"127.0.0.1:6379",
		"http://h:1",
		"redis+tls://h:1",
		"redis://",
		"redis://h:1?color=red",
		"quorum://a:1,,b:2",
		"redis://u:%zz@h:1",
		"redis://h:notaport",
		"redis://h:99999",
		"redis://h:0",
		"redis://h:",
		"redis://h:-1",
		"quorum://a:1,b:70000,c:3",
		"quorum://a:1,a:1,b:2",
		"redis://h:1?tls_ca=/etc/ca.pem",
		"quorum://a:1,b:2?tls_server_name=x",
		"rediss://h:1?tls_ca=/nonexistent/ca.pem",
		"rediss://h:1?tls_cert=/nonexistent/c.pem",
		"rediss://h:1?tls_insecure=true",
		"redis+sentinel://s1",
		"redis+sentinel://s1/",
		"redis+sentinel://s1/m/",
		"redis+cluster://n1/1",
	} {
		_, err := connect.ParseURL(raw)
		var ae *lease.ArgError
		if !errors.As(err, &ae) || ae.Arg != "url" || !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v; want *ArgError for url", raw, err)
		}
	}
	// A setting's bad value, or one the URL's strategy does not take: the
	// setting's own ArgError, as Config.Check, the command's flag and the
	// option give it.
	for _, tc := range []struct{ raw, arg string }{
		{"redis://h:1/x", "DB"},
		{"redis://h:1/-1", "DB"},
		{"redis+sentinel://s1/m/x", "DB"},
		{"redis://h:1?ttl=forever", "TTL"},
		{"redis://h:1?dial_timeout=1", "DialTimeout"},
		{"redis://h:1?idle_ttl=never", "IdleTTL"},
		{"redis://h:1?durable=true", "DurableNodes"},
		{"redis://h:1?node_timeout=10ms", "NodeTimeout"},
		{"redis://h:1?max_ttl=1m", "MaxTTL"},
		{"redis://h:1?drift_factor=0.5", "DriftFactor"},
		{"quorum://a:1,b:2?durable=sometimes", "DurableNodes"},
		{"quorum://a:1,b:2?node_timeout=fast", "NodeTimeout"},
		{"quorum://a:1,b:2?max_ttl=1", "MaxTTL"},
		{"redis://h:1?sentinel_password=x", "SentinelPassword"},
		{"redis://h:1?sentinel_username=x", "SentinelUsername"},
		{"quorum://a:1,b:2?replicas=1", "Replicas"},
		{"redis://h:1?replicas=-1", "Replicas"},
		{"redis://h:1?replicas=1", "ReplicaTimeout"},
		{"redis://h:1?replica_timeout=soon", "ReplicaTimeout"},
		{"redis://h:1?client=jedis", "Client"},
		// Well formed, but the quorum's default node timeout (50ms) is
		// not below half of it: Open would refuse it.
		{"quorum://a:1,b:2,c:3?ttl=100ms", "TTL"},
	} {
		_, err := connect.ParseURL(tc.raw)
		var ae *lease.ArgError
		s := settings.Named(tc.arg)
		if !errors.As(err, &ae) || ae.Arg != tc.arg || ae.Rule != s.Rule && ae.Rule != s.Syntax() &&
			ae.Rule != "applies to "+s.Scopes.String() || !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v; want the *ArgError of %s", tc.raw, err, tc.arg)
		}
	}
	for _, raw := range []string{
		"redis://user:hunter2@h:1?color=red",
		"redis+sentinel://s1/m?sentinel_password=hunter2&color=red",
	} {
		_, err := connect.ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q): error %v; want one that hides the password", raw, err)
		}
	}
}

func TestOpenBadConfig(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		cfg  dlock.Config
		arg  string
	}{
		{"unknown strategy", dlock.Config{Strategy: "paxos", Addrs: []string{"h:1"}}, "Strategy"},
		{"no addrs", dlock.Config{}, "Addrs"},
		{"no addrs quorum", dlock.Config{Strategy: "quorum"}, "Addrs"},
		{"single with two", dlock.Config{Addrs: []string{"a:1", "b:2"}}, "Addrs"},
		{"no port", dlock.Config{Addrs: []string{"h"}}, "Addrs"},
		{"port not a number", dlock.Config{Addrs: []string{"h:notaport"}}, "Addrs"},
		{"port out of range", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "b:99999", "c:3"}}, "Addrs"},
		{"repeated", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1", "a:1", "b:1"}}, "Addrs"},
		{"client", dlock.Config{Addrs: []string{"h:1"}, Client: "jedis"}, "Client"},
		{"ttl", dlock.Config{Addrs: []string{"h:1"}, TTL: -time.Second}, "TTL"},
		{"tiny ttl", dlock.Config{Addrs: []string{"h:1"}, TTL: time.Millisecond}, "TTL"},
		{"db", dlock.Config{Addrs: []string{"h:1"}, DB: -1}, "DB"},
		{"dial timeout", dlock.Config{Addrs: []string{"h:1"}, DialTimeout: -1}, "DialTimeout"},
		{"durable single", dlock.Config{Addrs: []string{"h:1"}, DurableNodes: true}, "DurableNodes"},
		{"node timeout single", dlock.Config{Addrs: []string{"h:1"}, NodeTimeout: time.Millisecond}, "NodeTimeout"},
		{"max TTL single", dlock.Config{Addrs: []string{"h:1"}, MaxTTL: time.Minute}, "MaxTTL"},
		{"negative node timeout", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, NodeTimeout: -1}, "NodeTimeout"},
		{"node timeout vs TTL", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, TTL: time.Second, NodeTimeout: 500 * time.Millisecond}, "NodeTimeout"},
		{"node timeout vs default TTL", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, NodeTimeout: 15 * time.Second}, "NodeTimeout"},
		{"negative max TTL", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, MaxTTL: -1}, "MaxTTL"},
		{"max TTL below TTL", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, TTL: 2 * time.Second, MaxTTL: time.Second}, "MaxTTL"},
		{"cluster quorum", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, Cluster: true}, "Cluster"},
		{"sentinel quorum", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, SentinelMaster: "m"}, "SentinelMaster"},
		{"cluster and sentinel", dlock.Config{Addrs: []string{"a:1"}, Cluster: true, SentinelMaster: "m"}, "Cluster"},
		{"cluster db", dlock.Config{Addrs: []string{"a:1"}, Cluster: true, DB: 1}, "DB"},
		{"sentinel password alone", dlock.Config{Addrs: []string{"a:1"}, SentinelPassword: "x"}, "SentinelPassword"},
		{"sentinel username alone", dlock.Config{Addrs: []string{"a:1"}, SentinelUsername: "x"}, "SentinelUsername"},
		{"drift factor", dlock.Config{Addrs: []string{"h:1"}, DriftFactor: 0.5}, "DriftFactor"},
		{"TTL within the default node timeout", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, TTL: 100 * time.Millisecond}, "TTL"},
		{"replicas quorum", dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, Replicas: 1, ReplicaTimeout: time.Second}, "Replicas"},
		{"negative replicas", dlock.Config{Addrs: []string{"a:1"}, Replicas: -1}, "Replicas"},
		{"replicas without timeout", dlock.Config{Addrs: []string{"a:1"}, Replicas: 1}, "ReplicaTimeout"},
		{"replica timeout alone", dlock.Config{Addrs: []string{"a:1"}, ReplicaTimeout: time.Second}, "ReplicaTimeout"},
	} {
		lk, err := dlock.Open(ctx, tc.cfg)
		var ae *lease.ArgError
		if lk != nil || !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("Open(%s) = %v, %v; want *ArgError for %s", tc.name, lk, err, tc.arg)
		}
	}
}

// withUser adds an ACL user alice with password s3cret, so Open's
// credentials are checked while the test's own client needs none.
func withUser(t *testing.T, srv *redistest.Server) {
	t.Helper()
	_, err := srv.Do("ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all")
	require.NoError(t, err)
}

func TestOpenRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	withUser(t, srv)
	ctx := t.Context()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			lk, err := dlock.OpenURL(ctx, "redis://alice:s3cret@"+srv.Addr()+"/3?ttl=5s&client="+client)
			require.NoError(t, err, "OpenURL")
			l, err := lk.TryAcquire(ctx, "open-"+client)
			require.NoError(t, err, "TryAcquire")
			if ttl := l.TTL(); ttl <= 0 || ttl > 5*time.Second {
				t.Fatalf("TTL = %v; want within the URL's 5s", ttl)
			}
			if _, err := lk.TryAcquire(ctx, "open-"+client); !errors.Is(err, dlock.ErrTaken) {
				t.Fatalf("second TryAcquire: %v; want ErrTaken", err)
			}
			if ks, _ := srv.Info("db3"); !strings.HasPrefix(ks, "keys=") {
				t.Fatalf("INFO db3 = %q; want the lock's hash in database 3", ks)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := lk.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := lk.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

func TestOpenWrongPassword(t *testing.T) {
	srv := redistest.Start(t)
	withUser(t, srv)
	for _, client := range redistest.Clients {
		lk, err := dlock.Open(t.Context(), dlock.Config{Addrs: []string{srv.Addr()}, Username: "alice", Password: "nope", Client: client})
		if err == nil {
			lk.Close()
			t.Errorf("%s: Open with a wrong password succeeded", client)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.Kill()
	for _, client := range redistest.Clients {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		lk, err := dlock.Open(ctx, dlock.Config{Addrs: []string{addr}, Client: client, DialTimeout: 200 * time.Millisecond})
		cancel()
		if err == nil {
			lk.Close()
			t.Errorf("%s: Open of a dead single server succeeded", client)
		}
	}
}

func TestOpenQuorum(t *testing.T) {
	srvs := redistest.StartN(t, 4)
	down := redistest.Start(t)
	downAddr := down.Addr()
	down.Kill()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			// Five masters, one of them down. Fresh masters sit out one
			// maximum TTL, then each is repaired by an attempt that hears
			// from a majority of the others: four are up.
			url := "quorum://" + srvs[0].Addr() + "," + srvs[1].Addr() + "," + srvs[2].Addr() + "," +
				srvs[3].Addr() + "," + downAddr + "?ttl=300ms&dial_timeout=100ms&client=" + client
			lk, err := dlock.OpenURL(ctx, url)
			require.NoError(t, err, "OpenURL")
			defer lk.Close()
			// Fresh nodes sit out one maximum TTL, so Acquire rather than
			// TryAcquire.
			l, err := lk.Acquire(ctx, "q-"+client)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if !l.Fenced() {
				t.Fatalf("quorum lease has no token")
			}
			require.NoError(t, l.Release(ctx), "Release")
		})
	}
}

// TestOpenQuorumOptions: durable=true skips the sit-out of fresh masters,
// and Config.Observer reaches the Locker of either strategy and its leases.
func TestOpenQuorumOptions(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	ctx := t.Context()
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			cfg, err := connect.ParseURL("quorum://" + srvs[0].Addr() + "," + srvs[1].Addr() + "," + srvs[2].Addr() +
				"?ttl=2s&durable=true&node_timeout=500ms&client=" + client)
			require.NoError(t, err)
			rec := &eventLog{}
			cfg.Observer = rec
			lk, err := dlock.Open(ctx, cfg)
			require.NoError(t, err, "Open")
			defer lk.Close()
			l, err := lk.TryAcquire(ctx, "durable-"+client)
			if err != nil {
				t.Fatalf("TryAcquire on fresh masters declared durable: %v", err)
			}
			require.NoError(t, l.Release(ctx))
			rec.expect(t, "quorum", observe.AcquireStarted, observe.Vote, observe.AcquireEnded, observe.Released)

			single, err := dlock.Open(ctx, dlock.Config{Addrs: []string{srvs[0].Addr()}, Client: client, Observer: rec})
			require.NoError(t, err, "Open")
			defer single.Close()
			l, err = single.TryAcquire(ctx, "single-"+client)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx))
			rec.expect(t, "single", observe.AcquireStarted, observe.AcquireEnded, observe.Released)
		})
	}
}

// eventLog is an Observer that keeps every event.
type eventLog struct{ events.Recorder }

// masterChanges returns the addresses of the observe.MasterChanged events
// heard, in order.
func (r *eventLog) masterChanges() []string {
	var addrs []string
	for _, e := range r.Events() {
		if e.Kind == observe.MasterChanged {
			addrs = append(addrs, e.Node)
		}
	}
	return addrs
}

// expect checks that every kind was heard, all from strategy, and forgets
// the events.
func (r *eventLog) expect(t *testing.T, strategy string, kinds ...observe.EventKind) {
	t.Helper()
	ev := r.Take()
	for _, k := range kinds {
		if !slices.ContainsFunc(ev, func(e observe.Event) bool { return e.Kind == k }) {
			t.Errorf("no %v event among %v", k, ev)
		}
	}
	for _, e := range ev {
		if e.Strategy != strategy {
			t.Errorf("event %v from %q; want %q", e.Kind, e.Strategy, strategy)
		}
	}
}

// TestOpenNoClientRetries: the go-redis clients Open builds never send a
// script again by themselves after its reply was lost (go-redis's default
// is three retries): the strategy gives the claim up instead (and runs
// that cleanup once), and the next attempt succeeds. (valkey-go retries
// only read-only commands, which no script of dlock's is.)
func TestOpenNoClientRetries(t *testing.T) {
	srv := redistest.Start(t)
	d := redistest.StartDropper(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, client := range []string{connect.ClientGoRedis} {
		t.Run(client, func(t *testing.T) {
			lk, err := dlock.Open(ctx, dlock.Config{Addrs: []string{d.Addr()}, Client: client})
			require.NoError(t, err)
			defer lk.Close()
			key := "no-retries-" + client
			warm, err := lk.TryAcquire(ctx, key) // load the scripts
			require.NoError(t, err)
			require.NoError(t, warm.Release(ctx))
			d.Drop(0, 1) // and the abandon's
			if l, err := lk.TryAcquire(ctx, key); err == nil {
				_ = l.Release(ctx)
			}
			calls, _, err := srv.ScriptStats()
			require.NoError(t, err)
			d.Drop(0, 1)
			if l, err := lk.TryAcquire(ctx, key); err == nil {
				_ = l.Release(ctx)
				t.Fatalf("TryAcquire with its reply lost: granted; want the exchange's error")
			}
			after, _, err := srv.ScriptStats()
			require.NoError(t, err)
			// The claim, then the abandon that gives it up.
			if ran := after - calls; ran != 2 {
				t.Errorf("%d scripts ran for one lost claim; want 2 (the claim once, then its abandon)", ran)
			}
			l, err := lk.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire after the lost reply: %v", err)
			}
			_ = l.Release(ctx)
		})
	}
}

// TestOpenBadConfigSaysDurations: a bad duration reads back as written.
func TestOpenBadConfigSaysDurations(t *testing.T) {
	_, err := dlock.Open(t.Context(), dlock.Config{Strategy: "quorum", Addrs: []string{"a:1"}, TTL: time.Second, NodeTimeout: 600 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "invalid NodeTimeout 600ms:") {
		t.Errorf("Open = %v; want the node timeout as 600ms", err)
	}
}
