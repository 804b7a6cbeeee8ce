// Command dlock runs a command under a distributed lock on Redis or Valkey,
// inspects who holds a lock, and demonstrates the trade between the single
// and quorum strategies on servers it starts itself.
//
//	dlock run --key nightly --ttl 30s --wait 1m -- ./nightly.sh
//	dlock inspect nightly
//	H=$(dlock acquire --key deploy) && dlock release --handle "$H"
//	dlock release --force --key nightly
//	dlock demo
//
// See docs/cli.md for every flag, the exit codes and examples.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/dlockgo/dlock/connect"
)

// Exit codes. Those from 64 follow sysexits(3); the child's own exit code
// passes through unchanged, so a child that exits with one of these numbers
// is indistinguishable from dlock saying it (see docs/cli.md).
const (
	exitOK          = 0
	exitNotHeld     = 1   // inspect: nobody holds the lock; extend, release: the servers said the handle's lease ended
	exitUsage       = 64  // EX_USAGE: bad flags, arguments or configuration
	exitUnavailable = 69  // EX_UNAVAILABLE: the servers did not answer, or no majority did
	exitSoftware    = 70  // EX_SOFTWARE: an error dlock did not expect
	exitTaken       = 75  // EX_TEMPFAIL: the last attempt found the lock held elsewhere
	exitLost        = 76  // the lease was lost while CMD ran (CMD was stopped), or had ended when CMD exited
	exitAuth        = 77  // EX_NOPERM: a server refused the username or password, or wants one
	exitCannotExec  = 126 // CMD exists but could not be started
	exitNotFound    = 127 // CMD was not found
	exitSignal      = 128 // + n: CMD, or dlock while waiting, ended by signal n
)

const exitCodesHelp = `Exit codes:
  0      CMD exited 0 (run, elect); the lock is held (inspect); done
         (acquire, extend, release)
  1-63   CMD's own exit code, passed through (run, elect); 1: nobody holds
         the lock (inspect), the servers answered that the handle's lease
         has ended (extend, release)
  64     bad usage: flags, arguments or configuration; a handle that is not
         one, was edited, or is for other servers or strategy (EX_USAGE)
  69     servers unavailable: no answer, or no majority answered (for
         extend, release and inspect: too few to tell), also when --wait
         ran out while they were (EX_UNAVAILABLE)
  70     internal error (EX_SOFTWARE)
  75     lock held elsewhere: --wait 0 found it taken, or --wait ran out and
         the last attempt found it taken; for elect, another stayed leader
         for --wait; for run --rate, the limit did not admit the run within
         --wait (EX_TEMPFAIL)
  76     lease (or leadership) lost while CMD ran (renewal refused or
         validity ran out; CMD was stopped), or ended by the time CMD
         exited
  77     authentication failed: a server refused the username or password, or
         wants one (EX_NOPERM)
  126    CMD could not be started
  127    CMD not found
  128+n  CMD was killed by signal n, or dlock got signal n while waiting for the lock
`

const mainUsage = `dlock: distributed locks on Redis and Valkey, from the shell.

Usage:
  dlock run [flags] --key KEY -- CMD [ARGS...]   run CMD while holding the lock on KEY
  dlock run --rate N/PERIOD --key KEY -- CMD     run CMD once the rate limit on KEY admits it
  dlock elect [flags] --name OFFICE -- CMD [...] run CMD while this process leads OFFICE
  dlock inspect [flags] KEY                      show who holds the lock on KEY
  dlock acquire [flags] --key KEY                take the lock on KEY, print its lease's handle
  dlock extend [flags] [--handle H] [--ttl D]    extend the lease a handle names ($DLOCK_HANDLE)
  dlock release [flags] [--handle H]             release the lease a handle names ($DLOCK_HANDLE)
  dlock release [flags] --force --key KEY        break the lock on KEY, whoever holds it
  dlock demo [flags]                             show the single and quorum strategies at work
  dlock help COMMAND                             flags and examples of COMMAND
  dlock version                                  the version and commit of this binary (also --version)

Servers (every command but demo): the command line wins over the environment:
  --url URL, --addrs A,B,C [--strategy single|quorum] or --config FILE
  (one of them), else $DLOCK_URL, else redis://127.0.0.1:6379.

`

func main() {
	// go-redis prints of its own (a Sentinel group's master, each change of
	// it); the command reports errors itself.
	connect.SetGoRedisLog(nil)
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0] and returns the process's
// exit code.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage, exitCodesHelp)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runMain(args[1:], stdout, stderr)
	case "inspect":
		return inspectMain(args[1:], stdout, stderr)
	case "elect":
		return electMain(args[1:], stdout, stderr)
	case "demo":
		return demoMain(args[1:], stdout, stderr)
	case "acquire":
		return acquireMain(args[1:], stdout, stderr)
	case "extend":
		return extendMain(args[1:], stdout, stderr)
	case "release":
		return releaseMain(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version(debug.ReadBuildInfo()))
		return exitOK
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return dispatch([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage, exitCodesHelp)
		return exitOK
	default:
		fmt.Fprintf(stderr, "dlock: unknown command %q\n\n%s", args[0], mainUsage)
		return exitUsage
	}
}

// flagSet reports whether the command line gave the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseFlags parses a subcommand's args. When they ask for help it prints
// the usage to stdout; when they are wrong, fs has already said why on its
// output. ok is false in both cases, and code is the exit code to return.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, false
	}
	return exitUsage, false
}
