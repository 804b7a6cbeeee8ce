package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/connect"
	"github.com/dlockgo/dlock/lease"
)

const inspectUsage = `Usage: dlock inspect [flags] KEY

Shows who holds the lock on KEY: the owner (its first 8 characters: the
whole value would let anyone release the lock), the metadata the holder
stored (dlock run --metadata, option.Metadata), the fencing token, and
the time left, by the servers' clocks. With the quorum strategy, one line
per node too, saying whether the node votes or sits out after a restart,
a flush or its first use, and until when: judged by the max TTL the URL
or flags give (max_ttl, else the TTL), so give the workers' own. Reads
only; changes nothing. Exits 0 when the lock is held, 1 when it is not,
69 when the servers do not answer, or too few of them to tell (on a
quorum: an owner seen on some nodes, with those that did not answer, could
make a majority).

Examples:
  dlock inspect nightly-report
  dlock inspect --url redis://lock.internal:6379/2 migrate
  dlock inspect --addrs r1:6379,r2:6379,r3:6379 --strategy quorum leader
  DLOCK_URL=quorum://r1,r2,r3,r4,r5 dlock inspect rotate
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
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// The Locker the workers would open, so that a quorum node's sit-out
	// is judged with their max TTL and node timeout.
	l, err := dlock.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return acquireExitCode(err)
	}
	defer l.Close()
	info, err := l.Inspect(ctx, key)
	if err != nil {
		fmt.Fprintf(stderr, "dlock inspect: %v\n", err)
		return acquireExitCode(err)
	}

	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	if cfg.Strategy == connect.StrategyQuorum {
		return printQuorum(w, info)
	}
	fmt.Fprintf(w, "key\t%s\n", info.Key)
	fmt.Fprintf(w, "strategy\tsingle (%s)\n", info.Nodes[0].Node)
	if !info.Held {
		fmt.Fprintf(w, "state\tfree\n")
		fmt.Fprintf(w, "last token\t%v\n", info.Token)
		return exitNotHeld
	}
	fmt.Fprintf(w, "state\theld\n")
	fmt.Fprintf(w, "owner\t%s\n", short(info.Owner))
	printMetadata(w, info.Metadata)
	fmt.Fprintf(w, "token\t%v\n", info.Token)
	fmt.Fprintf(w, "ttl\t%v\n", info.TTL)
	return exitOK
}

func printQuorum(w io.Writer, info lease.Info) int {
	answered := 0
	for _, n := range info.Nodes {
		if n.Err == nil {
			answered++
		}
	}
	fmt.Fprintf(w, "key\t%s\n", info.Key)
	fmt.Fprintf(w, "strategy\tquorum (%d nodes, %d needed, %d answered)\n", len(info.Nodes), info.Quorum, answered)
	// Free only when no owner seen, with every node that did not answer
	// on its side, could make a majority: otherwise it may be held.
	most, votes := 0, map[string]int{}
	for _, n := range info.Nodes {
		if n.Err == nil && n.Owner != "" {
			votes[n.Owner]++
			most = max(most, votes[n.Owner])
		}
	}
	unknown := !info.Held && most+len(info.Nodes)-answered >= info.Quorum
	code := exitOK
	switch {
	case info.Held:
		held := 0
		for _, n := range info.Nodes {
			if n.Owner == info.Owner {
				held++
			}
		}
		fmt.Fprintf(w, "state\theld (on %d of %d nodes)\n", held, len(info.Nodes))
		fmt.Fprintf(w, "owner\t%s\n", short(info.Owner))
		printMetadata(w, info.Metadata)
		fmt.Fprintf(w, "token\t%v\n", info.Token)
		fmt.Fprintf(w, "ttl\t%v (while a majority holds it)\n", info.TTL)
	case unknown:
		fmt.Fprintf(w, "state\tunknown (held on %d of the %d nodes that answered: with those that did not, it may be held by a majority)\n", most, answered)
		code = exitUnavailable
	default:
		fmt.Fprintf(w, "state\tfree (no owner on a majority)\n")
		fmt.Fprintf(w, "last token\t%v\n", info.Token)
		code = exitNotHeld
	}
	now := time.Now()
	fmt.Fprintf(w, "\nnode\towner\tttl\tcounter\tvotes\n")
	for _, n := range info.Nodes {
		if n.Err != nil {
			fmt.Fprintf(w, "%s\t-\t-\t-\terror: %v\n", n.Node, n.Err)
			continue
		}
		owner, ttl := "-", "-"
		if n.Owner != "" {
			owner, ttl = short(n.Owner), n.TTL.String()
		}
		votes := "yes"
		switch {
		case n.SitsOut > 0:
			// The node's own clock counts the sit-out; the time shown is
			// this machine's clock plus what is left.
			votes = fmt.Sprintf("sits out until %s (%v more): restarted, flushed or new %v ago",
				now.Add(n.SitsOut).Format("15:04:05.000"), n.SitsOut.Round(time.Millisecond), n.SinceLoss.Round(time.Millisecond))
		case n.Unrepaired:
			votes = "yes, once the next acquire repairs its counters"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", n.Node, owner, ttl, n.Counter, votes)
	}
	if answered < info.Quorum || unknown {
		for _, n := range info.Nodes {
			if errors.Is(n.Err, dlock.ErrAuth) {
				return exitAuth
			}
		}
		return exitUnavailable
	}
	return code
}

// printMetadata prints what the holder stored with option.Metadata.
func printMetadata(w io.Writer, metadata string) {
	if metadata != "" {
		q := strconv.QuoteToGraphic(metadata) // no control characters on a terminal
		fmt.Fprintf(w, "metadata\t%s\n", q[1:len(q)-1])
	}
}

// short returns the first 8 characters of an owner value: enough to tell
// owners apart, too little to release their lock.
func short(owner string) string {
	if len(owner) <= 8 {
		return owner
	}
	return owner[:8]
}
