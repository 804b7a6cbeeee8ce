package redlock

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
