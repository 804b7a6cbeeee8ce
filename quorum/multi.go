package quorum

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/argerr"
	"github.com/dlockgo/dlock/internal/settings"
	"github.com/dlockgo/dlock/lease"
	"github.com/dlockgo/dlock/option"
)

// leaveSet is leave for a waiter on the locks of ls.
func (lk *Locker) leaveSet(ctx context.Context, ls *lockSet, w *waiter, idx []int, ttl time.Duration) {
	args := append([]string{w.id}, ls.channels...)
	r := lk.fanout(context.WithoutCancel(ctx), idx, lk.cleanupTimeout(ttl),
		request{script: leaveSetScript, keys: ls.leave, args: args}, nil)
	r.abandon()
}

// setOptions checks the arguments of an acquisition of keys, all or
// nothing, and returns its options.
func (lk *Locker) setOptions(ctx context.Context, keys []string, opts []option.Option) (settings.Call, error) {
	if err := argerr.CheckContext(ctx); err != nil {
		return settings.Call{}, err
	}
	if err := checkKeys(keys); err != nil {
		return settings.Call{}, err
	}
	return lk.options(ctx, keys[0], lk.cfg.TTL, opts)
}

// checkKeys returns an *lease.ArgError when keys cannot name a set of
// locks: none, more than MaxKeys, an empty key or a repeated one.
func checkKeys(keys []string) error {
	switch {
	case len(keys) == 0:
		return &lease.ArgError{Arg: "keys", Value: len(keys), Rule: "must hold at least one key"}
	case len(keys) > MaxKeys:
		return &lease.ArgError{Arg: "keys", Value: len(keys), Rule: fmt.Sprintf("must hold at most %d keys (quorum.MaxKeys)", MaxKeys)}
	}
	seen := make(map[string]int, len(keys))
	for i, key := range keys {
		arg := "keys[" + strconv.Itoa(i) + "]"
		if key == "" {
			return &lease.ArgError{Arg: arg, Value: key, Rule: "must not be empty"}
		}
		if j, ok := seen[key]; ok {
			return &lease.ArgError{Arg: arg, Value: key, Rule: "must not repeat keys[" + strconv.Itoa(j) + "]"}
		}
		seen[key] = i
	}
	return nil
}

// first returns keys[0], or "" for none: the key an acquisition of keys is
// reported under.
func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
