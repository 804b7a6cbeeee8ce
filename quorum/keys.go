package quorum

import "strings"

// keySet holds the names of one lock's keys, cut from one string (one
// allocation), in the order the scripts take them: script is lock, gone,
// queue, queue deadlines, then the node-wide epoch, for the acquire
// script; the token script adds the fence counter and the node-wide floor,
// high-water mark and repair mark. commit is lock, fence, floor, high;
// release is lock, gone, queue, queue deadlines, fence.
type keySet struct {
	key     string
	script  [9]string
	commit  [4]string
	release [5]string
	channel string
}

func newKeySet(key string) *keySet {
	const (
		pre = "dlock:{"
		lk  = "}:lock"
		gn  = "}:gone"
		qu  = "}:queue"
		dl  = "}:queue:deadlines"
		fn  = "}:fence"
		ch  = "}:released"
	)
	var b strings.Builder
	b.Grow(6*(len(pre)+len(key)) + len(lk+gn+qu+dl+fn+ch))
	cut := func(suffix string) string {
		start := b.Len()
		b.WriteString(pre)
		b.WriteString(key)
		b.WriteString(suffix)
		return b.String()[start:]
	}
	ks := &keySet{key: key}
	ks.script[0] = cut(lk)
	ks.script[1] = cut(gn)
	ks.script[2] = cut(qu)
	ks.script[3] = cut(dl)
	ks.script[5] = cut(fn)
	ks.channel = cut(ch)
	ks.script[4], ks.script[6], ks.script[7], ks.script[8] = epochKey, floorKey, highKey, repairedKey
	ks.commit = [4]string{ks.script[0], ks.script[5], floorKey, highKey}
	ks.release = [5]string{ks.script[0], ks.script[1], ks.script[2], ks.script[3], ks.script[5]}
	return ks
}

// acquire returns the acquire script's keys: all nine with tokens.
func (ks *keySet) acquire(tokens bool) []string {
	if tokens {
		return ks.script[:]
	}
	return ks.script[:5]
}

// extend returns the extend script's keys: the lock, and with tokens its
// fence counter.
func (ks *keySet) extend(tokens bool) []string {
	if tokens {
		return ks.commit[:2]
	}
	return ks.commit[:1]
}

// Node-wide keys.
const (
	epochKey    = "dlock:epoch"    // when the node last lost its data, µs, and the run that stamped it (see lua/epoch.lua)
	highKey     = "dlock:high"     // the highest token committed on the node
	floorKey    = "dlock:floor"    // the repair's lower bound on every counter of the node
	repairedKey = "dlock:repaired" // the epoch record the node was repaired for
)

var repairKeys = []string{epochKey, floorKey, highKey, repairedKey}

// lockSet holds the keys of a lease on several locks, in the order the
// set scripts take them (lua/*_set.lua).
type lockSet struct {
	name string // the keys joined by commas, for errors and events
	ks   []*keySet
	// vote is phase 1's keys: the first lock's as a single lock's vote
	// takes them (keySet.acquire), then lock, gone, queue, queue
	// deadlines and fence counter of each other lock.
	vote    []string
	commit  []string // floor, high, then each lock's lock and fence counter
	extend  []string // each lock's lock, and with tokens its fence counter
	release []string // each lock's keySet.release
	leave   []string // each lock's keySet.release but the fence counter
	// The arguments that name each lock's channel: release's, its tokens
	// between them (see releaseArgs), and leave's.
	channels []string
}

func newLockSet(keys []string, tokens bool) *lockSet {
	k := len(keys)
	ls := &lockSet{name: strings.Join(keys, ","), ks: make([]*keySet, k), channels: make([]string, k)}
	for j, key := range keys {
		ls.ks[j] = newKeySet(key)
		ls.channels[j] = ls.ks[j].channel
	}
	ls.vote = append(make([]string, 0, 9+5*(k-1)), ls.ks[0].acquire(tokens)...)
	ls.commit = append(make([]string, 0, 2+2*k), floorKey, highKey)
	ls.release = make([]string, 0, 5*k)
	ls.leave = make([]string, 0, 4*k)
	for j, ks := range ls.ks {
		if j > 0 {
			ls.vote = append(ls.vote, ks.script[0], ks.script[1], ks.script[2], ks.script[3], ks.script[5])
		}
		ls.commit = append(ls.commit, ks.script[0], ks.script[5])
		ls.extend = append(ls.extend, ks.extend(tokens)...)
		ls.release = append(ls.release, ks.release[:]...)
		ls.leave = append(ls.leave, ks.release[:4]...)
	}
	return ls
}
