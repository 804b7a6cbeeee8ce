// Package election elects one leader per named office on dlock's leases,
// with either strategy behind a dlock.Locker: whatever dlock.Open returns,
// a *single.Locker or a *quorum.Locker.
//
// A candidate campaigns with a value that says who it is (a host, an
// address) and, once elected, holds a Term: a lease on the office's lock,
// renewed until it resigns or loses it, whose fencing token orders the
// terms. Anyone reads the current leader with Leader, and follows every
// change with Observe, which hears the terms' own announcements on the
// lock's servers (Locker.Publish and Watch) rather than polling them.
//
// The guarantee: at most one leader at a time whose token a fenced
// resource accepts. Leadership can overlap by the clock, when a leader is
// paused (a GC pause, a stalled VM) past its lease and a successor is
// elected meanwhile: the paused one still believes it leads until it
// notices its term's end, and only the token tells the two apart, so a
// leader must carry Token into every write that matters, and the resource
// must refuse an older token (package fence). docs/election.md has the
// failure cases and the measured handoff times.
//
// What an election keeps on the servers is the office's lock and nothing
// more: its keys are bounded as every lock's are, and announcements are
// published, never stored.
package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/ctxerr"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/option"
)

// ErrNoLeader is Leader's error when the office is vacant.
var ErrNoLeader = errors.New("election: no leader")

// ErrUnfenced is Campaign's error on a Locker whose leases carry no
// fencing token (a quorum made with option.Tokens(false)): without one, a
// paused leader cannot be told from its successor.
var ErrUnfenced = errors.New("election: the locker hands out no fencing tokens")

// KeyPrefix starts the lock key of every office: the office "db-primary"
// is the lock "election:db-primary", which is the name Inspect and `dlock
// inspect` know it by.
const KeyPrefix = "election:"

// Locker is what an election needs of a lock: Acquire and Inspect, and
// Publish and Watch to announce terms and follow them (delivery is a hint:
// messages coalesce). What dlock.Open returns, a *single.Locker and a
// *quorum.Locker each are one. Declared here, so that the package links
// neither the root package nor the client libraries it pulls in.
type Locker interface {
	Acquire(ctx context.Context, key string, opts ...option.Option) (*lease.Lease, error)
	Inspect(ctx context.Context, key string) (lease.Info, error)
	Publish(ctx context.Context, key, message string) error
	Watch(ctx context.Context, key string) (messages <-chan string, stop func(), err error)
}

// Election is one named office, campaigned for and observed through a
// Locker. It holds no state of its own between calls, and is safe for
// concurrent use: any number of candidates and observers may share it.
type Election struct {
	lk   Locker
	name string
	key  string
	opts []option.Option  // every term's lease options but the metadata
	obs  observe.Observer // may be nil
}

// strategy names elections in Observer events.
const strategy = "election"

// New returns the office name, campaigned for through locker. opts may
// set option.TTL, the TTL of each term's lease: how long a leader that
// died without resigning keeps the office from the next one, and how long
// a paused leader may go on believing it leads (by default the Locker's,
// whose rules for a TTL apply at each campaign); option.Retry, how a
// campaign paces its attempts while the office is held (by default the
// Locker's); and option.Observer, which hears campaigns and the ends of
// terms under the strategy name "election" and the office's lock key: a
// Campaign as an acquisition (AcquireStarted, AcquireEnded), a Resign as
// Released, a term that ended otherwise as Lost. A term's renewals are its
// lease's, which the Locker's own Observer hears. It returns an
// *lease.ArgError for a nil locker, an empty name, or an option that does
// not apply or is out of range.
func New(locker Locker, name string, opts ...option.Option) (*Election, error) {
	if locker == nil {
		return nil, &lease.ArgError{Arg: "locker", Value: nil, Rule: "must not be nil"}
	}
	if name == "" {
		return nil, &lease.ArgError{Arg: "name", Value: name, Rule: "must not be empty"}
	}
	c, err := settings.New(settings.Election, opts)
	if err != nil {
		return nil, err
	}
	// A zero TTL and Retry are the Locker's at each campaign.
	e := &Election{lk: locker, name: name, key: KeyPrefix + name, obs: c.Observer,
		opts: []option.Option{option.AutoRenew(true), option.TTL(c.TTL), option.Retry(c.Retry.Min, c.Retry.Max)}}
	return e, nil
}

// Name returns the office's name.
func (e *Election) Name() string { return e.name }

// Key returns the key of the office's lock: KeyPrefix and the name.
func (e *Election) Key() string { return e.key }

// Leader is an office's holder as its lock's servers see it.
type Leader struct {
	// Value is what the leader campaigned with. The zero Leader, which
	// Observe delivers for a vacant office, is the only one without a
	// Token and a TTL.
	Value string
	// Token is the leader's fencing token: terms of an office carry
	// strictly increasing tokens.
	Token fence.Token
	// TTL is the time the leader's lease has left by the servers' clocks
	// when they were read: the latest a dead leader gives the office up.
	TTL time.Duration
}

// Leader returns the office's current leader, or an error matching
// ErrNoLeader when the office is vacant. It reads the servers (Inspect):
// the answer is as of one moment, and a leader elected or gone since is
// not in it. When too few servers answer to tell (the one server; for a
// quorum, so few that the silent nodes could make up a majority for a
// holder), it returns their errors instead.
//
// A quorum's next leader holds the lock on a majority one round trip
// before its token is committed there; a read in between reports it with
// the previous term's token, or with the next one that a release's grants
// committed on some of its nodes (quorum's handoff) when its own is
// another, while its campaign has not returned yet. Observe waits for the
// new token.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return Leader{}, err
	}
	l, _, _, err := e.read(ctx)
	if err != nil {
		return Leader{}, err
	}
	if l == (Leader{}) {
		return Leader{}, fmt.Errorf("%w for %q", ErrNoLeader, e.name)
	}
	return l, nil
}

// read inspects the office's lock: its leader (the zero Leader when
// vacant), the highest token the servers have handed out for it, and
// whether the leader's token is settled: on a majority of the nodes it
// holds, as a committed token is. A quorum's next leader, between its
// lock and its token's commit, holds nodes whose counters carry the
// previous term's token or, where a release's grants committed the next
// token for it or for another waiter (quorum's handoff), that one: no
// token of its own yet.
func (e *Election) read(ctx context.Context) (Leader, fence.Token, bool, error) {
	info, err := e.lk.Inspect(ctx, e.key)
	if err != nil {
		return Leader{}, 0, false, fmt.Errorf("election: read the leader of %q: %w", e.name, err)
	}
	if !info.Held {
		// Vacant only if the servers that did not answer could not make
		// up a majority for anyone: a holder seen on too few, with the
		// rest silent, may hold the office all the same.
		var errs []error
		votes := map[string]int{}
		most := 0
		for _, n := range info.Nodes {
			switch {
			case n.Err != nil:
				errs = append(errs, n.Err)
			case n.Owner != "":
				votes[n.Owner]++
				most = max(most, votes[n.Owner])
			}
		}
		if most+len(errs) >= info.Quorum {
			// The nodes' timeouts are their failures, not the end
			// of ctx: the error matches that only when ctx ended.
			return Leader{}, 0, false, ctxerr.Wrap(ctx, fmt.Errorf("election: read the leader of %q: %d of %d servers answered, too few to tell: %w",
				e.name, len(info.Nodes)-len(errs), len(info.Nodes), ctxerr.Detach(errors.Join(errs...))))
		}
		return Leader{}, info.Token, true, nil
	}
	carried := 0
	for _, n := range info.Nodes {
		if n.Owner == info.Owner && n.Counter == info.Token {
			carried++
		}
	}
	settled := len(info.Nodes) == 0 || carried >= info.Quorum
	return Leader{Value: info.Metadata, Token: info.Token, TTL: info.TTL}, info.Token, settled, nil
}
