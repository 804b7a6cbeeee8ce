package quorum

import (
	"context"
	"strconv"
	"sync"
)

// repairs gathers every phase 1 answer of one attempt, those read after
// the outcome too, and once all nodes have answered or failed, repairs the
// nodes that lost their data, have sat out, and were not repaired yet. It
// runs on the caller and the node workers, and repairs on goroutines of its own,
// all counted in the Locker's WaitGroup: off the attempt's critical path,
// and waited for by Close.
//
// Why the repair is safe, under the assumption the guard makes throughout
// (one node loses its data at a time: a node loses it only while every
// other node that lost data has been repaired since): let t be any token
// committed before the repair, on a commit majority C. The repaired node X
// is in C only if t was committed on X before its loss, since X takes no
// commit between its loss and its repair. C without X still holds at least
// N/2 of the N-1 other nodes, and the repair read the high-water marks of
// at least N/2+1 of them: the two sets meet, since N/2 + N/2+1 > N-1. The
// node where they meet still holds t or, if it lost its data after t's
// commit, was repaired before X's loss (the assumption), by this same
// argument, to a floor of at least t; either way its high-water mark is at
// least t. So the floor, the maximum read, is at least every token X held,
// whatever its key, and X's effective counter, max(counter, floor), is
// again at least every token X ever committed.
// Marks are read after X's sit-out, when every acquisition that was in
// flight at the loss can no longer commit (its locks have expired): no
// commit that X missed lands after the read. The state of the other nodes
// does not matter: nodes sitting out or waiting for their own repair still
// answer with their marks. Commits made after the read, while X still
// sits out, happen on majorities without X, which every later majority
// meets at a node other than X.
type repairs struct {
	lk    *Locker
	mu    sync.Mutex
	left  int
	more  int // counters in each answer past a single lock's (see parseVote)
	votes []vote
}

// repairs reports whether attempts must gather answers for repairs: the
// guard is on and tokens are issued (a Locker without tokens reads no
// counters, so it repairs none).
func (lk *Locker) repairs() bool { return !lk.cfg.Durable && lk.cfg.Tokens }

func (lk *Locker) newRepairs(more int) *repairs {
	return &repairs{lk: lk, left: len(lk.nodes), more: more, votes: make([]vote, len(lk.nodes))}
}

// add records one node's phase 1 answer, exactly once per node, whether
// the attempt read it or it came late; the caller holds a count in the
// Locker's WaitGroup (an operation, or the answer's call).
func (rp *repairs) add(a result) {
	var v vote
	if a.err == nil {
		v = rp.lk.parseVote(a.i, a.reply, rp.more)
	}
	rp.mu.Lock()
	rp.votes[a.i] = v
	rp.left--
	last := rp.left == 0
	rp.mu.Unlock()
	if last {
		rp.start()
	}
}

// start sends the repair of every node that needs one and can have it:
// answers from at least a quorum of the other nodes.
func (rp *repairs) start() {
	lk := rp.lk
	q := lk.Quorum()
	for i, v := range rp.votes {
		if !v.read || v.lost || v.repaired {
			continue
		}
		var floor int64
		others := 0
		for j, w := range rp.votes {
			if j != i && w.read {
				others++
				floor = max(floor, w.high)
			}
		}
		if others < q {
			continue
		}
		// The caller runs on a counted goroutine: Add cannot race Close's Wait.
		lk.wg.Go(func() { lk.repair(i, v.epoch, floor) })
	}
}

// repair raises node i's floor to floor and marks it repaired for epoch,
// unless its epoch changed. Close cuts it short: a node left unrepaired is
// repaired by a later attempt.
func (lk *Locker) repair(i int, epoch string, floor int64) {
	ctx, cancel := context.WithTimeout(lk.closing, lk.cleanupTimeout(lk.cfg.TTL))
	defer cancel()
	lk.busy[i].Add(1)
	defer lk.busy[i].Add(-1)
	_, _ = lk.nodes[i].Eval(ctx, repairScript, repairKeys, epoch, strconv.FormatInt(floor, 10))
}
