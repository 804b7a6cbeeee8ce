package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/redlock"
	"github.com/dlockgo/dlock/single"
)

const inspectUsage = `Usage: dlock inspect [flags] KEY

Shows who holds the lock on KEY: the owner (its first 8 characters: the
whole value would let anyone release the lock), the fencing token, and the
time left, by the servers' clocks. With the quorum strategy, one line per
node too. Reads only; changes nothing. Exits 0 when the lock is held, 1
when it is not, 69 when the servers do not answer.

Examples:
  dlock inspect nightly-report
  dlock inspect --url redis://lock.internal:6379/2 migrate
  dlock inspect --addrs r1:6379,r2:6379,r3:6379 --strategy quorum leader
  DLOCK_URL=redlock://r1,r2,r3,r4,r5 dlock inspect rotate
  dlock inspect --config /etc/dlock.conf cleanup

Flags:
`

func inspectMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dlock inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), inspectUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "dlock inspect: want exactly one KEY (dlock inspect --help)")
		return exitUsage
	}
	key := fs.Arg(0)
	cfg, _, err := conn.resolve(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return exitUsage
	}
	nodes, closeNodes, err := dialNodes(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return exitUnavailable
	}
	defer closeNodes()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	if cfg.Strategy == dlock.StrategyQuorum {
		lk, err := redlock.New(nodes, redlock.WithNodeTimeout(*timeout/2))
		if err != nil {
			fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
			return exitUsage
		}
		defer lk.Close()
		info, err := lk.Inspect(ctx, key)
		if err != nil {
			fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
			return exitUnavailable
		}
		return printQuorum(w, info)
	}
	lk, err := single.New(nodes[0])
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return exitUsage
	}
	info, err := lk.Inspect(ctx, key)
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return exitUnavailable
	}
	fmt.Fprintf(w, "key\t%s\n", info.Key)
	fmt.Fprintf(w, "strategy\tsingle (%s)\n", nodes[0])
	if !info.Held {
		fmt.Fprintf(w, "state\tfree\n")
		fmt.Fprintf(w, "last token\t%v\n", info.Token)
		return exitNotHeld
	}
	fmt.Fprintf(w, "state\theld\n")
	fmt.Fprintf(w, "owner\t%s\n", short(info.Owner))
	fmt.Fprintf(w, "token\t%v\n", info.Token)
	fmt.Fprintf(w, "ttl\t%v\n", info.TTL)
	return exitOK
}

func printQuorum(w io.Writer, info redlock.Info) int {
	answered := 0
	for _, n := range info.Nodes {
		if n.Err == nil {
			answered++
		}
	}
	fmt.Fprintf(w, "key\t%s\n", info.Key)
	fmt.Fprintf(w, "strategy\tquorum (%d nodes, %d needed, %d answered)\n", len(info.Nodes), info.Quorum, answered)
	code := exitOK
	if info.Held {
		held := 0
		for _, n := range info.Nodes {
			if n.Owner == info.Owner {
				held++
			}
		}
		fmt.Fprintf(w, "state\theld (on %d of %d nodes)\n", held, len(info.Nodes))
		fmt.Fprintf(w, "owner\t%s\n", short(info.Owner))
		fmt.Fprintf(w, "token\t%v\n", info.Token)
		fmt.Fprintf(w, "ttl\t%v (while a majority holds it)\n", info.TTL)
	} else {
		fmt.Fprintf(w, "state\tfree (no owner on a majority)\n")
		fmt.Fprintf(w, "last token\t%v\n", info.Token)
		code = exitNotHeld
	}
	fmt.Fprintf(w, "\nnode\towner\tttl\tcounter\n")
	for _, n := range info.Nodes {
		switch {
		case n.Err != nil:
			fmt.Fprintf(w, "%s\t-\t-\t-\terror: %v\n", n.Node, n.Err)
		case n.Owner == "":
			fmt.Fprintf(w, "%s\t-\t-\t%v\n", n.Node, n.Counter)
		default:
			fmt.Fprintf(w, "%s\t%s\t%v\t%v\n", n.Node, short(n.Owner), n.TTL, n.Counter)
		}
	}
	if answered < info.Quorum {
		return exitUnavailable
	}
	return code
}

// short returns the first 8 characters of an owner value: enough to tell
// owners apart, too little to release their lock.
func short(owner string) string {
	if len(owner) <= 8 {
		return owner
	}
	return owner[:8]
}
