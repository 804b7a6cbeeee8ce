package election_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dlockgo/dlock/election"
)

// TestMemory: what an election leaves on its servers after many terms
// (resigned, and one whose leader died) is the office's lock keys, each
// set to expire, and they do expire: announcements are published, never
// stored, and the lock's keys follow the strategy's idle TTL.
func TestMemory(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		name := e.office("memory")
		conf := lockerConf{ttl: time.Second, idle: 2 * time.Second}
		const candidates, terms = 3, 20
		obs := observe(t, newElection(t, e.locker(t, conf), name))
		go func() {
			for range obs {
			}
		}()
		var wg sync.WaitGroup
		for c := range candidates {
			el := newElection(t, e.locker(t, conf), name)
			wg.Go(func() {
				for i := range terms {
					term, err := el.Campaign(ctx, "c"+strconv.Itoa(c)+"-"+strconv.Itoa(i))
					if err != nil {
						t.Errorf("Campaign: %v", err)
						return
					}
					if err := term.Resign(ctx); err != nil {
						t.Errorf("Resign: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		// A leader that dies in office.
		dlk, links := e.cuttable(t, conf)
		dead := campaign(t, newElection(t, dlk, name), "dies")
		links.cut()
		ended(t, dead)

		// The lock's keys: single's hash; the quorum's lock (the dead
		// leader's, until its TTL) and fence counter.
		prefix := "dlock:{" + election.KeyPrefix + name + "}"
		allowed := map[string]bool{prefix: true}
		if e.strategy == strategyQuorum {
			allowed = map[string]bool{prefix + ":lock": true, prefix + ":fence": true}
		}
		mine := func(k string) bool { return strings.HasPrefix(k, prefix) }
		for i, s := range e.srvs {
			keys, err := s.Keys()
			require.NoError(t, err)
			for _, k := range keys {
				if !mine(k) {
					continue
				}
				if !allowed[k] {
					t.Errorf("server %d keeps %s after %d terms; want the lock's keys only", i, k, candidates*terms+1)
				}
				// -2: it expired since KEYS listed it.
				pttl, err := s.Do("PTTL", k)
				require.NoError(t, err)
				if pttl == "-1" {
					t.Errorf("server %d: %s has no expiry; want it set to expire", i, k)
				}
			}
		}
		for _, s := range e.srvs {
			s.WaitKeysGone(t, 15*time.Second, mine)
		}
		links.restore()
		_ = dead.Resign(ctx)
	})
}
