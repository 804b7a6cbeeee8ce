package election

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/lease"
)

// Bounds of an observer's reads of the servers.
const (
	readTimeout  = lease.ReleaseTimeout  // one read
	readRetryMin = 50 * time.Millisecond // the first pause after a failed read
	readRetryMax = time.Second           // the longest
)

// Observe delivers the office's leader now, then each change: a new term,
// and a vacancy when a leader resigned or its lease ran out with no
// successor yet (the zero Leader). Consecutive values differ in Value or
// Token; changes that follow each other closely may arrive as the latest
// one only. The channel is closed when ctx ends, which ends the one
// goroutine Observe starts: end it before closing the Locker, whose reads
// would otherwise fail, retried, until then.
//
// Observe does not poll. It watches the office's lock for the terms'
// announcements (Locker.Watch) and reads the servers when one tells it
// something new; a leader that dies announces nothing, so it also reads
// them once when the current leader's lease is due to run out. An
// announcement lost (a subscription connection broken) is made up for by
// the next: a leader repeats its own at about half its lease's time left.
// Reads that fail are retried, paced, and deliver nothing meanwhile.
//
// It returns an error, and starts nothing, when the watch cannot be set up
// (the server, or a majority of a quorum's nodes, did not confirm it).
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return nil, err
	}
	msgs, stop, err := e.lk.Watch(ctx, e.key)
	if err != nil {
		return nil, fmt.Errorf("election: observe %q: %w", e.name, err)
	}
	out := make(chan Leader)
	go e.observe(ctx, msgs, stop, out)
	return out, nil
}

// observer is what one Observe knows of the office.
type observer struct {
	cur     Leader      // as last read; zero when vacant
	high    fence.Token // cur's token, or when vacant the last one handed out
	read    bool        // cur has been read once
	sent    Leader      // the last delivered
	pending bool        // cur differs from sent and waits for the reader
	fails   int         // reads failed in a row
	early   int         // reads in a row that found a term not begun yet
}

func (e *Election) observe(ctx context.Context, msgs <-chan string, stop func(), out chan<- Leader) {
	defer close(out)
	defer stop()
	var o observer
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	refresh := func() {
		timer.Stop()
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		l, high, settled, err := e.read(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if next, ok := o.update(l, high, settled, err); ok {
			timer.Reset(next)
		}
	}
	refresh()
	for {
		var send chan<- Leader
		if o.pending {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case send <- o.cur:
			o.sent, o.pending = o.cur, false
		case m := <-msgs:
			if o.heed(m) {
				refresh()
			}
		case <-timer.C:
			refresh()
		}
	}
}

// update takes in a read: its leader, the highest token, whether the
// leader's token is settled (see read), or its error. It returns when to
// read again without a message: when the leader's lease is due to run
// out, or after a failed read; ok is false when a vacancy needs no timer.
func (o *observer) update(l Leader, high fence.Token, settled bool, err error) (next time.Duration, ok bool) {
	if err != nil {
		o.fails++
		return min(readRetryMax, readRetryMin<<min(o.fails-1, 8)), true
	}
	o.fails = 0
	if o.read && o.early < maxEarly && l != (Leader{}) && (l.Token <= o.high || !settled) &&
		(l.Value != o.cur.Value || l.Token != o.cur.Token) {
		// A new holder with a token no larger than one already handed
		// out, or one not on a majority of its nodes: a quorum's next
		// leader between its lock and its token's commit (see Leader).
		// Its own announcement, or the next read, brings the token. Reads
		// that keep finding it so (a server that lost the latest tokens,
		// on a clock behind; a node that lost the lock, where the
		// commit's majority was just enough) are believed at last.
		o.early++
		return readRetryMin << min(o.early-1, 8), true
	}
	o.early = 0
	first := !o.read
	o.read = true
	o.cur, o.high = l, high
	if first || l.Value != o.sent.Value || l.Token != o.sent.Token {
		o.pending = true
	} else if o.pending {
		// Back to what the reader last got: nothing to tell.
		o.pending = false
	}
	if l == (Leader{}) {
		return 0, false
	}
	// A moment past the servers' end of the lease: the read was answered
	// before the timer starts, so the lease has run out by then.
	return l.TTL + time.Millisecond, true
}

// maxEarly bounds the reads in a row an observer waits through for a new
// term's token: together about 1.5 s.
const maxEarly = 5

// heed reports whether an announcement may tell something the last read
// did not, so the servers must be read: anything but a repeat of the
// current leader's election, or news of a term older than the one known.
func (o *observer) heed(msg string) bool {
	if !o.read {
		return true
	}
	kind, tok, ok := strings.Cut(msg, " ")
	t, err := strconv.ParseUint(tok, 10, 64)
	if !ok || err != nil {
		return true
	}
	held := o.cur != (Leader{})
	switch token := fence.Token(t); kind {
	case msgElected:
		return token > o.high || token == o.high && !held
	case msgEnded:
		return token > o.high || token == o.high && held
	}
	return true
}
