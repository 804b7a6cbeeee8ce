package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
)

const electUsage = `Usage: dlock elect [flags] --name OFFICE -- CMD [ARGS...]

Campaigns for OFFICE and runs CMD while this process is its leader: one
leader at a time across hosts, the others waiting their turn in the order
they came. The term's lease is renewed at a third of --ttl while CMD
runs; when CMD exits, dlock resigns (the next candidate is elected at
once) and exits with CMD's exit code. CMD gets DLOCK_OFFICE, DLOCK_KEY
(the office's lock) and DLOCK_TOKEN (the term's fencing token: pass it to
every write you fence, so that a paused former leader is refused) in its
environment, and runs in a process group of its own. Anyone can see the
leader, its --value and token with: dlock inspect election:OFFICE.

If leadership is lost (a renewal refused, or the servers unreachable until
the term's validity ran out), dlock sends SIGTERM to CMD's process group,
SIGKILL after --grace, and exits 76. Unlike run, elect waits without a
limit by default: --wait bounds the campaign (exit 75 when another stayed
leader that long).

Examples:
  dlock elect --name scheduler -- ./scheduler
  dlock elect --url quorum://r1,r2,r3,r4,r5 --name db-primary --value "$(hostname):5432" -- ./promote-and-serve
  dlock elect --name reindex --wait 10m -- ./reindex   # exit 75 if someone else led all that time

Flags:
`

func electMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dlock elect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		conn    connFlags
		name    = fs.String("name", "", "the office (required)")
		value   = fs.String("value", defaultMetadata(), "who this candidate is, shown to observers and by dlock inspect (at most 512 bytes)")
		wait    = fs.Duration("wait", 0, "how long to campaign; 0: until elected")
		grace   = fs.Duration("grace", 10*time.Second, "after lost leadership, time between SIGTERM and SIGKILL to CMD")
		verbose = fs.Bool("v", false, "report election and resignation on stderr")
	)
	conn.register(fs)
	describeFlag(fs, settings.TTL, "the term's lease TTL, renewed at a third of it: how long a leader that died holds the office", "the ttl of the URL or --config file, else 30s")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), electUsage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n", exitCodesHelp)
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	argv := fs.Args()
	switch {
	case *name == "":
		fmt.Fprintln(stderr, "dlock elect: --name is required (dlock elect --help)")
		return exitUsage
	case len(argv) == 0:
		fmt.Fprintln(stderr, "dlock elect: no command given: dlock elect --name OFFICE -- CMD [ARGS...]")
		return exitUsage
	case *value == "" || len(*value) > lease.MaxMetadata:
		fmt.Fprintf(stderr, "dlock elect: --value must be 1 to %d bytes\n", lease.MaxMetadata)
		return exitUsage
	case *grace < 0 || *wait < 0:
		fmt.Fprintln(stderr, "dlock elect: --wait and --grace must be >= 0")
		return exitUsage
	}
	cfg, source, err := conn.resolve(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "dlock elect: %v\n", err)
		return exitUsage
	}
	r := &runner{
		key: election.KeyPrefix + *name, ttl: cmp.Or(cfg.TTL, settings.DefaultTTL), wait: *wait, grace: *grace, argv: argv,
		verbose: *verbose, stderr: stderr, office: *name, value: *value,
		origin: origin(source, os.Getenv), name: "elect",
	}
	if r.verbose {
		r.logf("servers from %s: %s", r.origin, describe(cfg))
	}
	return r.run(cfg)
}
