package dlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/single"
)

// TestOpenSentinel is the seed's failover race through a real Sentinel
// promotion, on Lockers opened with redis+sentinel://: holder A claims on
// the master while replication is cut, the master dies, the Sentinels
// promote the replica, and B claims the same key there.
//
// Without replicas= (async), both hold the lock, as single's docs say a
// failover can make it; B's token is above A's, so the fence refuses A's
// write after B's, and A's Extend is refused. With replicas=1, single's
// contract is that a claim fewer replicas acknowledged is released and
// reported: A's claim made while replication is cut fails with a
// *single.ReplicaError and B is the only holder, while a claim the
// replica acknowledged before survives the promotion (B finds it taken,
// and A extends it on the new master).
//
// Either way the Lockers opened before the failover follow the Sentinels
// to the new master, with no restart: once the old master is back as a
// replica, A's Locker locks again. Each Locker's Observer hears of the
// failover once, as a observe.MasterChanged naming the promoted replica, and
// of no change before it; observe.Log writes it as a warning.
//
// And each client prints what the docs say it does: valkey-go nothing;
// go-redis, through its process-wide logger, only its lines about the
// Sentinel group ("sentinel: …"), the new master among them: those are
// out of any one client's reach (docs/observability.md).
func TestOpenSentinel(t *testing.T) {
	for _, client := range redistest.Clients {
		t.Run(client, func(t *testing.T) {
			t.Run("async", func(t *testing.T) { sentinelFailover(t, client, false) })
			t.Run("replicas=1", func(t *testing.T) { sentinelFailover(t, client, true) })
		})
	}
}

func sentinelFailover(t *testing.T, client string, replicas bool) {
	printed := recordGoRedisLog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	g := redistest.StartSentinels(t, 3)
	url := "redis+sentinel://" + strings.Join(g.Addrs(), ",") + "/" + g.Name + "?ttl=10s&dial_timeout=500ms&client=" + client
	urlA := url
	if replicas {
		urlA += "&replicas=1&replica_timeout=100ms"
	}
	// The URLs, with an Observer each, which no URL can name.
	open := func(url string, obs observe.Observer) dlock.Locker {
		cfg, err := connect.ParseURL(url)
		require.NoError(t, err, "ParseURL")
		cfg.Observer = obs
		lk, err := dlock.Open(ctx, cfg)
		require.NoError(t, err, "Open")
		return lk
	}
	evA, evB := &eventLog{}, &eventLog{}
	var logB lockedBuffer
	lkA := open(urlA, evA)
	defer lkA.Close()
	lkB := open(url, observe.Multi(evB, observe.Log(slog.New(slog.NewTextHandler(&logB, nil)))))
	defer lkB.Close()
	// The protected resource lives on a server of its own, which survives.
	store := fence.NewStore(redistest.NodeFor(t, client, redistest.Start(t).Addr()))

	// A history that did replicate.
	l0, err := lkA.TryAcquire(ctx, "k")
	require.NoError(t, err, "A's first claim")
	require.NoError(t, l0.Release(ctx))
	for hget(g.Replica, "k", "attempts") != l0.Token().String() || hget(g.Replica, "k", "owner") != "" {
		require.NoError(t, ctx.Err(), "the first claim and its release never reached the replica")
		time.Sleep(5 * time.Millisecond)
	}
	var kept *lease.Lease // acknowledged by the replica before the cut
	if replicas {
		kept, err = lkA.TryAcquire(ctx, "kept")
		require.NoError(t, err, "A's claim with replication running")
	}

	for name, ev := range map[string]*eventLog{"A": evA, "B": evB} {
		if got := ev.masterChanges(); len(got) > 0 {
			t.Errorf("%s heard of master changes %v before any failover; want none", name, got)
		}
	}

	g.Link.Cut()
	a, errA := lkA.TryAcquire(ctx, "k")
	if a != nil {
		require.NoError(t, store.Put(ctx, "res", "a1", a.Token()), "store, A's first write")
	}
	g.Master.Kill()
	require.NoError(t, g.WaitPromoted(ctx))

	// The clients learn of the new master from the Sentinels, a moment
	// after the Sentinels agree: until then a call may fail on the way.
	var b *lease.Lease
	err = eventually(ctx, func() (err error) { b, err = lkB.TryAcquire(ctx, "k"); return err }, dlock.ErrTaken)
	require.NoError(t, err, "B on the promoted replica")
	if b.Token() <= l0.Token() {
		t.Fatalf("B's token %d; want above the replicated %d", b.Token(), l0.Token())
	}
	if got := evB.masterChanges(); !slices.Equal(got, []string{g.Replica.Addr()}) {
		t.Errorf("B's Observer heard of master changes %v; want one, to the promoted replica %s", got, g.Replica.Addr())
	}
	if want := `msg="dlock master changed" strategy=single node=` + g.Replica.Addr(); !strings.Contains(logB.String(), want) {
		t.Errorf("observe.Log wrote %q; want a record with %q", logB.String(), want)
	}

	if replicas {
		var re *single.ReplicaError
		if a != nil || !errors.As(errA, &re) || re.Acked != 0 || re.Wanted != 1 {
			t.Fatalf("A's claim with replication cut = %v, %v; want a *single.ReplicaError, 0 of 1 acks", a, errA)
		}
		if _, err := lkB.TryAcquire(ctx, "kept"); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("B's claim of the key A's acknowledged lease holds: %v; want ErrTaken: the claim survived the promotion", err)
		}
		if err := eventually(ctx, func() error { return kept.Extend(ctx, 10*time.Second) }, dlock.ErrNotHeld); err != nil {
			t.Fatalf("A's Extend of its acknowledged lease on the new master: %v", err)
		}
		require.NoError(t, kept.Release(ctx))
	} else {
		require.NoError(t, errA, "A's claim on the master")
		if a.TTL() <= 0 || b.TTL() <= 0 {
			t.Fatalf("A's TTL %v, B's %v; want both held: the double grant of the race", a.TTL(), b.TTL())
		}
		if b.Token() <= a.Token() {
			t.Fatalf("B's token %d, A's %d; want B's above A's: floored at the server clock", b.Token(), a.Token())
		}
		require.NoError(t, store.Put(ctx, "res", "b1", b.Token()), "store, B's write")
		if err := store.Put(ctx, "res", "a2", a.Token()); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("store, A's write after B's: %v; want fence.ErrStale", err)
		}
		if err := eventually(ctx, func() error { return a.Extend(ctx, 10*time.Second) }, dlock.ErrNotHeld); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("A's Extend on the new master: %v; want ErrNotHeld", err)
		}
	}
	require.NoError(t, b.Release(ctx), "B's release")

	// The old master comes back as a replica of the new one; A's Locker,
	// never reopened, locks again there (with replicas=1, acknowledged by
	// that replica).
	g.Master.SetReplicaOf(g.Replica, "")
	g.Master.Restart()
	require.NoError(t, g.Master.WaitSynced(ctx))
	var again *lease.Lease
	err = eventually(ctx, func() (err error) { again, err = lkA.TryAcquire(ctx, "k"); return err }, dlock.ErrTaken)
	require.NoError(t, err, "A's Locker after the promotion")
	if again.Token() <= b.Token() {
		t.Fatalf("A's token after the promotion %d; want above B's %d", again.Token(), b.Token())
	}
	require.NoError(t, again.Release(ctx))
	// A's first change is to the promoted replica. Should the Sentinels
	// fail back to the old master once it has returned (a loaded machine
	// can make them judge the new one down: the test does not require it),
	// the client's move there is reported too: each change once, as the
	// client made it.
	got := evA.masterChanges()
	if len(got) == 0 || got[0] != g.Replica.Addr() {
		t.Errorf("A's Observer heard of master changes %v; want the first to the promoted replica %s", got, g.Replica.Addr())
	}
	for i := 1; i < len(got); i++ {
		if want := []string{g.Replica.Addr(), g.Master.Addr()}[i%2]; got[i] != want {
			t.Errorf("A's Observer heard of master changes %v; want each between the replica and the old master", got)
			break
		}
	}

	lines := printed.get()
	switch client {
	case connect.ClientValkeyGo:
		if len(lines) > 0 {
			t.Errorf("go-redis printed %q for valkey-go Lockers; want nothing", lines)
		}
	default:
		for _, l := range lines {
			if !strings.HasPrefix(l, "sentinel: ") {
				t.Errorf("go-redis printed %q; want only its Sentinel lines", l)
			}
		}
		newMaster := fmt.Sprintf("sentinel: new master=%q addr=%q", g.Name, g.Replica.Addr())
		if !slices.Contains(lines, newMaster) {
			t.Errorf("go-redis printed %q; want among them %q, the line docs/observability.md names", lines, newMaster)
		}
	}
}

// lockedBuffer is a bytes.Buffer that a logger may write while a test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSetGoRedisLog: the opt-in to quiet go-redis's own lines, or route
// them, for the whole program. With a logger, go-redis's Sentinel lines
// of a go-redis Locker arrive there as records; with nil, they are
// dropped: neither that logger nor the one before hears of a second
// Locker. Without it (TestOpenSentinel), go-redis prints them.
func TestSetGoRedisLog(t *testing.T) {
	before := recordGoRedisLog(t)
	g := redistest.StartSentinels(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	url := "redis+sentinel://" + strings.Join(g.Addrs(), ",") + "/" + g.Name + "?dial_timeout=500ms&client=" + connect.ClientGoRedis
	lockOnce := func() {
		lk, err := dlock.OpenURL(ctx, url)
		require.NoError(t, err, "OpenURL")
		defer lk.Close()
		l, err := lk.TryAcquire(ctx, "routed")
		require.NoError(t, err, "TryAcquire")
		require.NoError(t, l.Release(ctx))
	}

	var routed lockedBuffer
	connect.SetGoRedisLog(slog.New(slog.NewTextHandler(&routed, nil)))
	lockOnce()
	want := fmt.Sprintf(`level=INFO msg="sentinel: new master=\"%s\" addr=\"%s\"" source=go-redis`, g.Name, g.Master.Addr())
	if !strings.Contains(routed.String(), want) {
		t.Errorf("the logger given got %q; want a record %q", routed.String(), want)
	}

	connect.SetGoRedisLog(nil)
	had := routed.String()
	lockOnce()
	if got := routed.String(); got != had {
		t.Errorf("after SetGoRedisLog(nil), the logger given before got %q more", strings.TrimPrefix(got, had))
	}
	if got := before.get(); len(got) > 0 {
		t.Errorf("the logger before SetGoRedisLog got %q; want nothing", got)
	}
}

// eventually calls f until it returns nil or an error settled accepts, or
// until ctx ends: the errors in between are the client's, while it finds
// the new master (or, with replicas=1, the replica's first
// acknowledgements, which come once it has caught up).
func eventually(ctx context.Context, f func() error, settled ...error) error {
	for {
		err := f()
		if err == nil || ctx.Err() != nil || slices.ContainsFunc(settled, func(s error) bool { return errors.Is(err, s) }) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hget reads one field of a lock's hash on s, "" when it has none.
func hget(s *redistest.Server, key, field string) string {
	v, _ := s.LockField("dlock:{"+key+"}", field)
	return v
}

// TestOpenSentinelSecured opens redis+sentinel:// and rediss+sentinel://
// URLs on a group whose master and replica want an ACL user's password and
// whose Sentinels want a password of their own: with both right, a lock
// is taken on the master and released; a wrong or missing password, of
// either kind, fails Open with an error that matches ErrAuth and says
// whose it is: go-redis reports a Sentinel's refusal as the master's, and
// valkey-go says neither. Over TLS, every server, the Sentinels included,
// speaks TLS only and wants the client certificate.
func TestOpenSentinelSecured(t *testing.T) {
	certs := redistest.NewCerts(t)
	for _, tc := range []struct {
		name, scheme, query string
		opts                []redistest.Option
	}{
		{"plain", "redis+sentinel", "", nil},
		{"tls", "rediss+sentinel", "&" + tlsQuery(certs, true), []redistest.Option{redistest.WithTLS(certs, redistest.ClientCertRequired)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := redistest.StartSentinels(t, 3, append(tc.opts,
				redistest.WithAuth("locker", "data-pw"), redistest.WithSentinelPassword("sentinel-pw"))...)
			for _, client := range redistest.Clients {
				t.Run(client, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					defer cancel()
					url := func(userinfo, sentinelPassword string) string {
						u := tc.scheme + "://" + userinfo + strings.Join(g.Addrs(), ",") + "/" + g.Name +
							"?dial_timeout=1s&client=" + client + tc.query
						if sentinelPassword != "" {
							u += "&sentinel_password=" + sentinelPassword
						}
						return u
					}

					lk, err := dlock.OpenURL(ctx, url("locker:data-pw@", "sentinel-pw"))
					require.NoError(t, err, "OpenURL with both passwords")
					defer lk.Close()
					key := "secured-" + client
					l, err := lk.TryAcquire(ctx, key)
					require.NoError(t, err, "TryAcquire")
					if got := hget(g.Master, key, "attempts"); got != l.Token().String() {
						t.Errorf("the master's lock hash has attempts %q; want the lease's token %s", got, l.Token())
					}
					info, err := lk.Inspect(ctx, key)
					require.NoError(t, err, "Inspect")
					if len(info.Nodes) != 1 || (info.Nodes[0].Node != g.Master.Addr() && !strings.HasPrefix(info.Nodes[0].Node, `master "`+g.Name+`"`)) {
						t.Errorf("Inspect names the server %+v; want the master's address, or its name and Sentinels", info.Nodes)
					}
					require.NoError(t, l.Release(ctx), "Release")
					if got := hget(g.Master, key, "owner"); got != "" {
						t.Errorf("the master still names owner %q after Release", got)
					}
					require.NoError(t, lk.Close())

					master := `dlock: master "` + g.Name + `" of the Sentinels ` + strings.Join(g.Addrs(), ",") + ": authentication failed: node: server replied: "
					sentinel := "dlock: Sentinel " + g.Addrs()[0] + " refused the Sentinel credentials (sentinel_username, sentinel_password): node: server replied: "
					for _, bad := range []struct {
						name, userinfo, sentinelPassword string
						want                             string // the error's start
					}{
						{"wrong data password", "locker:wrong@", "sentinel-pw", master + "WRONGPASS"},
						{"no data password", "", "sentinel-pw", master + "NOAUTH"},
						{"wrong Sentinel password", "locker:data-pw@", "wrong", sentinel + "WRONGPASS"},
						{"no Sentinel password", "locker:data-pw@", "", sentinel + "NOAUTH"},
					} {
						start := time.Now()
						lk, err := dlock.OpenURL(ctx, url(bad.userinfo, bad.sentinelPassword))
						if lk != nil {
							lk.Close()
						}
						t.Logf("%s: %v (%v)", bad.name, err, time.Since(start))
						if err == nil || !strings.HasPrefix(err.Error(), bad.want) {
							t.Errorf("%s: OpenURL = %v; want an error starting %q", bad.name, err, bad.want)
							continue
						}
						if !errors.Is(err, dlock.ErrAuth) {
							t.Errorf("%s: %v does not match ErrAuth", bad.name, err)
						}
						if strings.Contains(err.Error(), "sentinel-pw") || strings.Contains(err.Error(), "data-pw") {
							t.Errorf("%s: the error shows a password: %v", bad.name, err)
						}
					}
					if tc.query != "" {
						plain := "redis+sentinel://locker:data-pw@" + strings.Join(g.Addrs(), ",") + "/" + g.Name +
							"?dial_timeout=1s&sentinel_password=sentinel-pw&client=" + client
						_, err := dlock.OpenURL(ctx, plain)
						if want := "is it a TLS port? use rediss+sentinel://"; err == nil || !strings.Contains(err.Error(), want) {
							t.Errorf("redis+sentinel:// to TLS Sentinels: %v; want an error with %q", err, want)
						}
					}
				})
			}
		})
	}
}

// TestOpenSentinelQuietDead: with no Sentinel answering, Open fails, and
// go-redis prints, besides its Sentinel lines, its pool's line about the
// dial that never reached a master: the failover client's own dialer
// fails before dlock's is called (docs/observability.md). valkey-go
// prints nothing.
func TestOpenSentinelQuietDead(t *testing.T) {
	dead := deadAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, client := range redistest.Clients {
		printed := recordGoRedisLog(t)
		lk, err := dlock.Open(ctx, dlock.Config{SentinelMaster: "gone", Addrs: []string{dead}, Client: client})
		if err == nil {
			lk.Close()
			t.Fatalf("%s: Open behind dead Sentinels succeeded", client)
		}
		lines := printed.get()
		if client == connect.ClientValkeyGo {
			if len(lines) > 0 {
				t.Errorf("go-redis printed %q for a valkey-go Locker; want nothing", lines)
			}
			continue
		}
		pool := false
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "sentinel: "):
			case strings.HasPrefix(l, "redis: connection pool: failed to dial after 1 attempts: redis: all sentinels specified in configuration are unreachable"):
				pool = true
			default:
				t.Errorf("go-redis printed %q; want only its Sentinel lines and its pool's failed dial", l)
			}
		}
		if !pool {
			t.Errorf("go-redis printed %q; want its pool's failed dial among them, as docs/observability.md says", lines)
		}
	}
}
