package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/internal/tlsfiles"
)

func TestInspectQuorum(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	url := urlOf(srvs...)
	if r := runBin(t, nil, "inspect", "--url", url, "q"); r.code != exitNotHeld || !strings.Contains(r.stdout, "free") {
		t.Errorf("before: got %v; want exit %d, free", r, exitNotHeld)
	}
	running := filepath.Join(t.TempDir(), "running")
	holder := command(nil, "run", "--url", url, "--ttl", "2s", "--wait", "10s", "--key", "q", "--",
		"sh", "-c", "touch "+running+"; sleep 2")
	var hout, herr bytes.Buffer
	holder.Stdout, holder.Stderr = &hout, &herr
	require.NoError(t, holder.Start())
	waitFor(t, "the holder's command", func() bool { _, err := os.Stat(running); return err == nil })
	srvs[2].Kill()
	r := runBin(t, nil, "inspect", "--url", url, "q")
	owner := regexp.MustCompile(`(?m)^owner\s+([0-9a-f]+)$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || owner == nil || len(owner[1]) != 8 || !strings.Contains(r.stdout, "held (on 2 of 3 nodes)") ||
		!strings.Contains(r.stdout, srvs[2].Addr()+"  -      -    -        error") && !strings.Contains(r.stdout, "error:") {
		t.Errorf("got %v; want held on 2 of 3, an 8-character owner, the dead node's error", r)
	}
	if hr := wait(t, holder, &hout, &herr); hr.code != 0 {
		t.Errorf("holder: %v", hr)
	}
}

// TestInspectMetadataSitOut reads back what an operator needs through the
// command: the holder's metadata (dlock run's default names the host, pid
// and command; --metadata sets it) and, on a quorum, a node that sits out
// after a restart, with its end time.
func TestInspectMetadataSitOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	quorum := redistest.StartN(t, 3)
	for _, c := range []struct {
		name string
		url  string
		meta []string // --metadata, if any
		want string
	}{
		{"single default", urlOf(srv), nil, "host="},
		{"single flag", urlOf(srv), []string{"--metadata", "job=backup\tnight"}, `job=backup\tnight`},
		{"quorum flag", urlOf(quorum...) + "?ttl=1s", []string{"--metadata", "job=rotate"}, "job=rotate"},
	} {
		running := filepath.Join(t.TempDir(), "running")
		args := append([]string{"run", "--url", c.url, "--wait", "10s", "--key", "m"}, c.meta...)
		holder := command(nil, append(args, "--", "sh", "-c", "touch "+running+"; sleep 1")...)
		var hout, herr bytes.Buffer
		holder.Stdout, holder.Stderr = &hout, &herr
		require.NoError(t, holder.Start())
		waitFor(t, "the holder's command", func() bool { _, err := os.Stat(running); return err == nil })
		r := runBin(t, nil, "inspect", "--url", c.url, "m")
		meta := regexp.MustCompile(`(?m)^metadata\s+(.*)$`).FindStringSubmatch(r.stdout)
		if r.code != exitOK || meta == nil || !strings.Contains(meta[1], c.want) {
			t.Errorf("%s: got %v; want exit 0 and metadata containing %q", c.name, r, c.want)
		}
		if c.meta == nil && (meta == nil || !strings.Contains(meta[1], "pid="+strconv.Itoa(holder.Process.Pid)) || !strings.Contains(meta[1], "cmd=sh")) {
			t.Errorf("%s: metadata %q; want the holder's pid %d and cmd=sh", c.name, meta, holder.Process.Pid)
		}
		if hr := wait(t, holder, &hout, &herr); hr.code != 0 {
			t.Errorf("%s: holder: %v", c.name, hr)
		}
	}

	// A restarted quorum node sits out: inspect says until when.
	quorum[1].Restart()
	r := runBin(t, nil, "inspect", "--url", urlOf(quorum...)+"?ttl=1s", "m")
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(quorum[1].Addr()) + `\s.*sits out until (\d\d:\d\d:\d\d\.\d{3}) \(([0-9.]+m?s) more\)`).FindStringSubmatch(r.stdout)
	if r.code != exitNotHeld || line == nil {
		t.Fatalf("after a restart: got %v; want exit %d and the restarted node's sit-out end", r, exitNotHeld)
	}
	left, err := time.ParseDuration(line[2])
	require.NoError(t, err)
	if left <= 0 || left > 2*time.Second {
		t.Errorf("sits out %v more; want in (0, 2s] for a 1s max TTL", left)
	}
	if n := strings.Count(r.stdout, "sits out until"); n != 1 {
		t.Errorf("%d nodes sit out; want the restarted one only:\n%s", n, r.stdout)
	}
}

// withFlags returns c with the command line args parsed into its
// settings' flags.
func withFlags(c connFlags, args ...string) connFlags {
	var parsed connFlags
	fs := flag.NewFlagSet("dlock", flag.PanicOnError)
	parsed.register(fs)
	_ = fs.Parse(args)
	c.settings = parsed.settings
	return c
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	files := 0
	file := func(body string) string {
		files++
		p := filepath.Join(dir, strconv.Itoa(files)+".conf")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	env := func(url string) func(string) string {
		return func(k string) string {
			if k == "DLOCK_URL" {
				return url
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name     string
		flags    connFlags
		env      string
		strategy string
		addrs    string
		client   string
		source   string
		ttl      time.Duration
		bad      bool
	}{
		{name: "default", strategy: "single", addrs: "127.0.0.1:6379", source: "default"},
		{name: "url", flags: connFlags{url: "redis://h:1/2"}, strategy: "single", addrs: "h:1", source: "--url"},
		{name: "url wins over env", flags: connFlags{url: "redis://h:1"}, env: "redis://e:1", addrs: "h:1", strategy: "single", source: "--url"},
		{name: "addrs quorum", flags: connFlags{addrs: "a:1, b:2,c:3", strategy: "quorum"}, strategy: "quorum", addrs: "a:1 b:2 c:3", source: "--addrs"},
		{name: "env", env: "quorum://a,b,c", strategy: "quorum", addrs: "a:6379 b:6379 c:6379", source: "$DLOCK_URL"},
		{name: "file wins over env", flags: connFlags{file: file("addrs=f:1\n")}, env: "redis://e:1", strategy: "single", addrs: "f:1"},
		{name: "client flag", flags: withFlags(connFlags{url: "redis://h:1"}, "--client", "valkey-go"), strategy: "single", addrs: "h:1", client: "valkey-go", source: "--url"},
		{name: "client flag over url", flags: withFlags(connFlags{url: "redis://h:1?client=valkey-go"}, "--client", "go-redis"), strategy: "single", addrs: "h:1", client: "go-redis", source: "--url"},
		{name: "ttl flag over url", flags: withFlags(connFlags{url: "redis://h:1?ttl=1m"}, "--ttl", "2m"), strategy: "single", addrs: "h:1", ttl: 2 * time.Minute, source: "--url"},
		{name: "url's ttl", flags: withFlags(connFlags{url: "redis://h:1?ttl=1m"}), strategy: "single", addrs: "h:1", ttl: time.Minute, source: "--url"},
		{name: "file's ttl over its url's", flags: connFlags{file: file("url = redis://h:1?ttl=1m\nttl = 3m\n")}, strategy: "single", addrs: "h:1", ttl: 3 * time.Minute},
		{name: "flag over file", flags: withFlags(connFlags{file: file("addrs = h:1\nttl = 3m\n")}, "--ttl", "4m"), addrs: "h:1", ttl: 4 * time.Minute},
		{name: "file url", flags: connFlags{file: file("# locks\nurl = quorum://a:1,b:2,c:3\nclient=valkey-go\npassword=s3cret\n")},
			strategy: "quorum", addrs: "a:1 b:2 c:3", client: "valkey-go"},
		{name: "file addrs", flags: connFlags{file: file("addrs=a:1\n")}, addrs: "a:1"},
		// A file's url keeps its client when the file names none.
		{name: "file url's client", flags: connFlags{file: file("url = redis://h:1?client=valkey-go\npassword = s3cret\n")},
			strategy: "single", addrs: "h:1", client: "valkey-go"},
		{name: "file unknown key", flags: connFlags{file: file("colour=blue\n")}, bad: true},
		{name: "file both", flags: connFlags{file: file("url=redis://a:1\naddrs=b:1\n")}, bad: true},
		{name: "file missing", flags: connFlags{file: "/nonexistent"}, bad: true},
		{name: "url and addrs", flags: connFlags{url: "redis://h:1", addrs: "a:1"}, bad: true},
		{name: "url and strategy", flags: connFlags{url: "redis://h:1", strategy: "quorum"}, bad: true},
		{name: "strategy alone", flags: connFlags{strategy: "quorum"}, bad: true},
		{name: "single with 2", flags: connFlags{addrs: "a:1,b:1"}, bad: true},
		{name: "bad strategy", flags: connFlags{addrs: "a:1", strategy: "paxos"}, bad: true},
		{name: "bad client", flags: connFlags{url: "redis://a:1?client=jedis"}, bad: true},
		{name: "bad client in a file", flags: connFlags{file: file("addrs=a:1\nclient=jedis\n")}, bad: true},
		{name: "bad ttl in a file", flags: connFlags{file: file("addrs=a:1\nttl=soon\n")}, bad: true},
		{name: "node timeout flag on a single server", flags: withFlags(connFlags{url: "redis://a:1"}, "--node-timeout", "1s"), bad: true},
		{name: "bad url", flags: connFlags{url: "http://h"}, bad: true},
		{name: "cluster url", flags: connFlags{url: "redis+cluster://a:1,b:2"}, addrs: "a:1 b:2"},
		{name: "sentinel url", flags: connFlags{url: "redis+sentinel://a,b/m"}, addrs: "a:26379 b:26379"},
		{name: "tls ca missing", flags: connFlags{addrs: "a:1", tlsFiles: tlsfiles.Files{CA: "/nonexistent"}}, bad: true},
		{name: "tls key alone", flags: connFlags{addrs: "a:1", tlsFiles: tlsfiles.Files{Key: "/etc/k.pem"}}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, source, err := tc.flags.resolve(env(tc.env))
			if tc.bad {
				var ue *usageError
				if err == nil || !errors.As(err, &ue) {
					t.Fatalf("got %+v, %v; want a usage error", cfg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			strategy := cfg.Strategy
			if strategy == "" {
				strategy = connect.StrategySingle
			}
			if tc.strategy != "" && strategy != tc.strategy || strings.Join(cfg.Addrs, " ") != tc.addrs || cfg.Client != tc.client {
				t.Errorf("got %s %v %q; want %s %s %q", strategy, cfg.Addrs, cfg.Client, tc.strategy, tc.addrs, tc.client)
			}
			if tc.ttl != 0 && cfg.TTL != tc.ttl {
				t.Errorf("TTL = %v; want %v", cfg.TTL, tc.ttl)
			}
			if tc.source != "" && source != tc.source {
				t.Errorf("source = %q; want %q", source, tc.source)
			}
		})
	}
}

// TestRunURLTTL: dlock run takes the lease's TTL from the URL's ?ttl= when
// --ttl is not given, and --ttl wins when it is. The TTL is read back on
// the server by dlock inspect while CMD runs: renewed at a third of it, the
// time left stays between two thirds of the TTL and the TTL.
func TestRunURLTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := urlOf(srv) + "?ttl=3s"
	for _, tc := range []struct {
		name  string
		flags []string
		want  time.Duration
	}{
		{"url", nil, 3 * time.Second},
		{"flag wins", []string{"--ttl", "6s"}, 6 * time.Second},
	} {
		key := "url-ttl-" + strings.ReplaceAll(tc.name, " ", "-")
		running := filepath.Join(t.TempDir(), "running")
		args := append(append([]string{"run", "--url", url, "--key", key}, tc.flags...),
			"--", "sh", "-c", "touch "+running+"; sleep 1")
		holder := command(nil, args...)
		var hout, herr bytes.Buffer
		holder.Stdout, holder.Stderr = &hout, &herr
		require.NoError(t, holder.Start())
		waitFor(t, "the holder's command", func() bool { _, err := os.Stat(running); return err == nil })
		r := runBin(t, nil, "inspect", "--url", url, key)
		m := regexp.MustCompile(`(?m)^ttl\s+(\S+)$`).FindStringSubmatch(r.stdout)
		var left time.Duration
		if m != nil {
			left, _ = time.ParseDuration(m[1])
		}
		if r.code != 0 || left <= tc.want*2/3-100*time.Millisecond || left > tc.want {
			t.Errorf("%s: inspect while held: got %v; want a ttl in (2/3 of %v, %v]", tc.name, r, tc.want, tc.want)
		}
		if hr := wait(t, holder, &hout, &herr); hr.code != 0 {
			t.Errorf("%s: holder: %v", tc.name, hr)
		}
	}
}

// TestInspectUnknown: on a quorum of 3, a lock held on one node that
// answers, free on the other, with the third stopped (SIGSTOP) and
// holding it too, may be held by a majority: inspect exits 69 and says it
// cannot tell, never 1 ("nobody holds the lock"). With the third node
// back, it reads held.
func TestInspectUnknown(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 3)
	url := durable(urlOf(srvs...))
	// An hour, so that no step of the wall clock ends it (see
	// TestHandleUnreachable).
	if r := runBin(t, nil, "acquire", "--url", url, "--ttl", "1h", "--key", "half"); r.code != exitOK {
		t.Fatalf("acquire: %v", r)
	}
	srvs[0].MustDo(t, "DEL", "dlock:{half}:lock")
	cont := srvs[2].PauseOnce()
	defer cont()
	r := runBin(t, nil, "inspect", "--url", url, "--timeout", "3s", "half")
	if r.code != exitUnavailable || !strings.Contains(r.stdout, "unknown") {
		t.Errorf("inspect, held on 1 of the 2 nodes that answer: %v; want exit %d, state unknown", r, exitUnavailable)
	}
	cont()
	if r := runBin(t, nil, "inspect", "--url", url, "half"); r.code != exitOK || !strings.Contains(r.stdout, "held (on 2 of 3 nodes)") {
		t.Errorf("inspect with every node back: %v; want exit 0, held on 2 of 3", r)
	}
}
