package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// keyBound is what dlock promises a key costs a server at most, in bytes of
// MEMORY USAGE: the bound the nemesis holds it to.
const keyBound = 512

// caseOfKey finds the case a benchmark key belongs to: the slug of its
// subject's name, as uncontended and contended build their keys.
var caseOfKey = regexp.MustCompile(`bench:\d+:(?:contention:)?([A-Za-z0-9_-]+)`)

// keyMemory reads, after the runs, every key left on the servers, and
// records for each case the keys it left (summed over the servers) and the
// largest of them (MEMORY USAGE, bytes): what the case costs the servers
// once it is over.
func keyMemory(ctx context.Context, addrs []string, rs []Result) (used []int64, err error) {
	type usage struct {
		keys, max float64
	}
	byCase := map[string]*usage{}
	for _, a := range addrs {
		c := newGoRedis(a)
		err := func() error {
			defer c.Close()
			m, err := usedMemory(ctx, c)
			if err != nil {
				return err
			}
			used = append(used, m)
			iter := c.Scan(ctx, 0, "*bench:*", 1000).Iterator()
			for iter.Next(ctx) {
				k := iter.Val()
				m := caseOfKey.FindStringSubmatch(k)
				if m == nil {
					continue
				}
				n, err := c.MemoryUsage(ctx, k).Result()
				if err == redis.Nil {
					continue // expired meanwhile
				}
				if err != nil {
					return fmt.Errorf("MEMORY USAGE %q on %s: %w", k, a, err)
				}
				u := byCase[m[1]]
				if u == nil {
					u = &usage{}
					byCase[m[1]] = u
				}
				u.keys++
				u.max = max(u.max, float64(n))
			}
			return iter.Err()
		}()
		if err != nil {
			return nil, err
		}
	}
	for i := range rs {
		if u := byCase[slug(subjectName(rs[i].ID))]; u != nil {
			rs[i].KeysLeft, rs[i].KeyBytesMax = f(u.keys), f(u.max)
		} else {
			rs[i].KeysLeft, rs[i].KeyBytesMax = f(0), f(0)
		}
	}
	return used, nil
}

// subjectName is the subject's name inside a Result's ID,
// "kind/NAME/c=N".
func subjectName(id string) string {
	_, rest, _ := strings.Cut(id, "/")
	if i := strings.LastIndex(rest, "/c="); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// printMemory prints keyMemory's findings for the dlock cases and peers.
func printMemory(w io.Writer, rs []Result, used []int64) {
	fmt.Fprintln(w, "Server memory after the runs, per case: keys it left on the servers, and the largest (MEMORY USAGE).")
	if len(used) > 0 {
		ms := make([]string, len(used))
		for i, u := range used {
			ms[i] = mb(u)
		}
		fmt.Fprintf(w, "used_memory of each server then: %s.\n", strings.Join(ms, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | client | c | keys left | largest key B |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|")
	for _, r := range rs {
		if r.KeysLeft == nil || r.Case == "floor" {
			continue
		}
		c := strconv.Itoa(r.Concurrency)
		if r.Case == "contention" {
			c = "contention"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", label(r), r.Client, c, num(r.KeysLeft, 0), num(r.KeyBytesMax, 0))
	}
	fmt.Fprintln(w)
}
