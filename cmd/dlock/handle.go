package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

const acquireUsage = `Usage: dlock acquire [flags] --key KEY

Takes the lock on KEY and prints its lease's handle on stdout, one line,
for shell steps that span several commands: dlock extend and dlock
release take it up (--handle, or $DLOCK_HANDLE), in this shell or
another on a host that reaches the same servers. Nothing is held
locally: the lease lives on the servers until its --ttl runs out, unless
extended or released. Keep the handle as secret as the lock: it releases
it. Reaching the servers the same way (the same URL or addresses, the
same strategy) is what lets a later step take it up: a handle of another
strategy or other servers is refused.

Examples:
  H=$(dlock acquire --key deploy --ttl 10m) || exit
  export DLOCK_HANDLE=$H
  ./step1.sh && dlock extend --ttl 10m && ./step2.sh
  dlock release

Flags:
`

const extendUsage = `Usage: dlock extend [flags] [--handle HANDLE] [--ttl D]

Extends the lease a handle names (dlock acquire printed it; --handle, else
$DLOCK_HANDLE) to --ttl from now, by default the TTL it was acquired
with. The servers check that the lease is still the handle's: exits 1
when they answer that it has ended (expired, released, broken or taken
over) or that the handle's token is not the lease's, 69 when they do not
answer (on a quorum, too few to tell), 64 for a handle that is not one,
was edited, or was written for other servers or another strategy.

Flags:
`

const releaseUsage = `Usage: dlock release [flags] [--handle HANDLE]
       dlock release [flags] --force --key KEY

Releases the lease a handle names (dlock acquire printed it; --handle,
else $DLOCK_HANDLE). Exits 1 when the servers answer that it had already
ended, 69 when they do not answer (on a quorum, too few to tell), 64 for
a handle that is not one, was edited, or was written for other servers
or another strategy.

With --force, an operator's break: ends whatever lease holds KEY, on
either strategy, and raises the key's fencing token above every token
handed out for it, the old holder's included. Show the break's token to
the fence of KEY's resource and the old holder's late writes are refused;
the next holder's token is above it anyway. Waiters are woken. Prints
who held KEY (owner, metadata, token) and the break's token; a key
nobody held gets a token all the same. The old holder learns of it at
its next renewal (dlock run then stops its command and exits 76).

Examples:
  dlock release --handle "$H"
  dlock release --force --key nightly-report
  dlock release --force --url quorum://r1,r2,r3 --key leader

Flags:
`

// handleCmd is what acquire, extend and release share: their flags, the
// servers among them, and where they write.
type handleCmd struct {
	name   string
	fs     *flag.FlagSet
	conn   connFlags
	stdout io.Writer
	stderr io.Writer
}

func newHandleCmd(name, usage string, stdout, stderr io.Writer) *handleCmd {
	c := &handleCmd{name: name, fs: flag.NewFlagSet("dlock "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.conn.register(c.fs)
	c.fs.Usage = func() {
		fmt.Fprint(c.fs.Output(), usage)
		c.fs.PrintDefaults()
		fmt.Fprint(c.fs.Output(), "\n", exitCodesHelp)
	}
	return c
}

func (c *handleCmd) logf(format string, args ...any) {
	fmt.Fprintf(c.stderr, "dlock "+c.name+": "+format+"\n", args...)
}

// open resolves the servers and opens the Locker, with the Config's TTL
// raised to at least ttl: that of a lease taken up and extended, which a
// quorum's lost-data guard must allow. It returns the Config too.
func (c *handleCmd) open(ctx context.Context, ttl time.Duration) (*dlock.Client, dlock.Config, int) {
	cfg, _, err := c.conn.resolve(os.Getenv)
	if err != nil {
		c.logf("%v", err)
		return nil, cfg, exitUsage
	}
	cfg.TTL = max(cfg.TTL, ttl)
	l, err := dlock.Open(ctx, cfg)
	if err != nil {
		return nil, cfg, c.failed("open", err)
	}
	return l, cfg, exitOK
}

// failed reports err and returns its exit code: that of an acquisition,
// and 1 for a lease the servers said is no longer held (an error that
// matches ErrNotHeld; servers that did not answer never make one).
func (c *handleCmd) failed(op string, err error) int {
	c.logf("%s: %v", op, err)
	if errors.Is(err, dlock.ErrNotHeld) && !errors.Is(err, dlock.ErrInvalid) {
		return exitNotHeld
	}
	return acquireExitCode(err)
}

// handle returns the --handle flag's value, else $DLOCK_HANDLE.
func (c *handleCmd) handle(flagValue string) (lease.Handle, int) {
	text := flagValue
	if text == "" {
		text = os.Getenv("DLOCK_HANDLE")
	}
	if text == "" {
		c.logf("--handle or $DLOCK_HANDLE is required (dlock %s --help)", c.name)
		return lease.Handle{}, exitUsage
	}
	h, err := lease.ParseHandle(text)
	if err != nil {
		c.logf("%v", err)
		return lease.Handle{}, exitUsage
	}
	return h, exitOK
}

func acquireMain(args []string, stdout, stderr io.Writer) int {
	c := newHandleCmd("acquire", acquireUsage, stdout, stderr)
	key := c.fs.String("key", "", "the lock's key (required)")
	wait := c.fs.Duration("wait", time.Minute, "how long to wait for the lock; 0: one attempt")
	meta := c.fs.String("metadata", defaultMetadata(), "stored with the lock for dlock inspect to show; empty for none (at most 512 bytes)")
	verbose := c.fs.Bool("v", false, "report the key, token and TTL on stderr")
	describeFlag(c.fs, settings.TTL, "lease TTL: the lease lives this long unless extended", "the ttl of the URL or --config file, else 30s")
	if code, ok := parseFlags(c.fs, args, stdout); !ok {
		return code
	}
	switch {
	case *key == "" || c.fs.NArg() > 0:
		c.logf("want --key KEY and no arguments (dlock acquire --help)")
		return exitUsage
	case *wait < 0:
		c.logf("--wait must be >= 0")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait+10*time.Second)
	defer cancel()
	// The lease lives the Locker's TTL, the Config's.
	locker, cfg, code := c.open(ctx, 0)
	if locker == nil {
		return code
	}
	defer locker.Close()
	opts := []option.Option{option.Metadata(*meta)}
	var (
		l   *lease.Lease
		err error
	)
	if *wait == 0 {
		l, err = locker.TryAcquire(ctx, *key, opts...)
	} else {
		wctx, cancelWait := context.WithTimeout(ctx, *wait)
		l, err = locker.Acquire(wctx, *key, opts...)
		cancelWait()
	}
	if err != nil {
		return c.failed(fmt.Sprintf("%q", *key), err)
	}
	h, err := l.Handle()
	if err != nil {
		return c.failed(fmt.Sprintf("%q", *key), err)
	}
	fmt.Fprintln(stdout, h.String())
	if *verbose {
		c.logf("holding %q, token %v, ttl %v; nothing renews it", *key, l.Token(), cmp.Or(cfg.TTL, settings.DefaultTTL))
	}
	return exitOK
}

func extendMain(args []string, stdout, stderr io.Writer) int {
	c := newHandleCmd("extend", extendUsage, stdout, stderr)
	text := c.fs.String("handle", "", "the lease's handle, as dlock acquire printed it; default $DLOCK_HANDLE")
	timeout := c.fs.Duration("timeout", 10*time.Second, "give up after this long")
	describeFlag(c.fs, settings.TTL, "extend to this long from now", "the TTL the lease was acquired with")
	if code, ok := parseFlags(c.fs, args, stdout); !ok {
		return code
	}
	if c.fs.NArg() > 0 {
		c.logf("want no arguments (dlock extend --help)")
		return exitUsage
	}
	h, code := c.handle(*text)
	if code != exitOK {
		return code
	}
	// --ttl, the table's flag, is the extension's; without it (or 0,
	// the default), a resumed lease's own.
	ttl := h.TTL
	if v, ok := c.conn.given(settings.TTL); ok && v.(time.Duration) > 0 {
		ttl = v.(time.Duration)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	l, done, code := c.resume(ctx, h, ttl, option.TTL(ttl))
	if l == nil {
		return code
	}
	defer done()
	if err := l.Extend(ctx, ttl); err != nil {
		return c.failed(fmt.Sprintf("%q", h.Key), err)
	}
	return exitOK
}

func releaseMain(args []string, stdout, stderr io.Writer) int {
	c := newHandleCmd("release", releaseUsage, stdout, stderr)
	text := c.fs.String("handle", "", "the lease's handle, as dlock acquire printed it; default $DLOCK_HANDLE")
	force := c.fs.Bool("force", false, "an operator's break: end whatever lease holds --key and raise its token")
	key := c.fs.String("key", "", "with --force, the lock's key")
	timeout := c.fs.Duration("timeout", 10*time.Second, "give up after this long")
	if code, ok := parseFlags(c.fs, args, stdout); !ok {
		return code
	}
	switch {
	case c.fs.NArg() > 0:
		c.logf("want no arguments (dlock release --help)")
		return exitUsage
	case *force && (*key == "" || *text != ""):
		c.logf("--force wants --key KEY, and no --handle")
		return exitUsage
	case !*force && *key != "":
		c.logf("--key goes with --force; a lease is released by its --handle")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *force {
		return c.forceRelease(ctx, *key)
	}
	h, code := c.handle(*text)
	if code != exitOK {
		return code
	}
	l, done, code := c.resume(ctx, h, h.TTL)
	if l == nil {
		return code
	}
	defer done()
	if err := l.Release(ctx); err != nil {
		return c.failed(fmt.Sprintf("%q", h.Key), err)
	}
	return exitOK
}

// resume opens the servers, with ttl as the lease TTL, and takes up the
// lease h names there; done closes what it opened. When it fails, the
// lease is nil and code says why.
func (c *handleCmd) resume(ctx context.Context, h lease.Handle, ttl time.Duration, opts ...option.Option) (l *lease.Lease, done func(), code int) {
	locker, _, code := c.open(ctx, ttl)
	if locker == nil {
		return nil, nil, code
	}
	l, err := locker.Resume(ctx, h.String(), opts...)
	if err != nil {
		locker.Close()
		return nil, nil, c.failed(fmt.Sprintf("%q", h.Key), err)
	}
	return l, func() { locker.Close() }, exitOK
}

// forceRelease breaks the lock on key and prints what it found.
func (c *handleCmd) forceRelease(ctx context.Context, key string) int {
	locker, _, code := c.open(ctx, 0)
	if locker == nil {
		return code
	}
	defer locker.Close()
	b, err := locker.ForceRelease(ctx, key)
	if err != nil {
		return c.failed(fmt.Sprintf("force %q", key), err)
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "key\t%s\n", b.Key)
	if b.Held {
		fmt.Fprintf(w, "was held by\t%s\n", short(b.Owner))
		printMetadata(w, b.Metadata)
		fmt.Fprintf(w, "its token\t%v\n", b.Was)
	} else {
		fmt.Fprintf(w, "was held by\tnobody\n")
		fmt.Fprintf(w, "last token\t%v\n", b.Was)
	}
	fmt.Fprintf(w, "break token\t%v\n", b.Token)
	return exitOK
}
