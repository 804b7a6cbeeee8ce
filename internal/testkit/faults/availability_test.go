package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/testkit/redistest"
	"github.com/dlockgo/dlock/option"
)

// tries is how many acquisitions each availability measurement makes.
const tries = 20

// TestNodeLoss measures availability when nodes die (SIGKILL): the quorum
// keeps granting with 2 of 5 dead and refuses every acquisition with 3 of 5
// dead; the single strategy refuses every acquisition once its one node is
// dead. Time to fail is the median duration of a refused attempt; with 3
// of 5 dead, every refusal must take at most twice the node timeout.
func TestNodeLoss(t *testing.T) {
	t.Run("quorum", func(t *testing.T) {
		t.Parallel()
		forEachClient(t, func(t *testing.T, client string) {
			minority := &Row{Scenario: "2 node loss", Variant: "2 of 5 killed", Strategy: "quorum", Client: client,
				Expected: "every acquisition granted (a majority lives)"}
			majority := &Row{Scenario: "2 node loss", Variant: "3 of 5 killed", Strategy: "quorum", Client: client,
				Expected: "every acquisition refused, fast"}
			record(t, minority)
			record(t, majority)
			srvs := redistest.StartN(t, 5)
			lk := newQuorum(t, nodesOn(t, client, addrs(srvs)...), option.DurableNodes(true), option.TTL(time.Second))
			redistest.Warm(t, lk)

			srvs[0].Kill()
			srvs[1].Kill()
			res := newResource()
			ok, ttf, _, errs := attempts(t, lk, res, "k", tries)
			res.fill(t, minority)
			minority.Acquired, minority.Attempts, minority.TimeToFailMs = Int(ok), Int(tries), ttf
			minority.Observed = errKinds(errs)
			if ok != tries {
				t.Errorf("2 of 5 dead: %d of %d granted (%s); want all", ok, tries, errKinds(errs))
			}

			srvs[2].Kill()
			res = newResource()
			ok, ttf, slowest, errs := attempts(t, lk, res, "k", tries)
			res.fill(t, majority)
			majority.Acquired, majority.Attempts, majority.TimeToFailMs = Int(ok), Int(tries), ttf
			majority.Observed = errKinds(errs)
			if ok != 0 {
				t.Errorf("3 of 5 dead: %d of %d granted; want none", ok, tries)
			}
			t.Logf("3 of 5 dead: slowest refusal %.1fms", slowest)
			// Every refusal, not only the median: the slowest one is
			// within twice the node timeout.
			if bound := 2 * float64(nodeTimeout.Milliseconds()); slowest > bound {
				t.Errorf("slowest refusal %.1fms; want every one within twice the node timeout (%v)",
					slowest, nodeTimeout)
			}
		})
	})
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		forEachClient(t, func(t *testing.T, client string) {
			row := &Row{Scenario: "2 node loss", Variant: "its 1 node killed", Strategy: "single", Client: client,
				Expected: "every acquisition refused, fast"}
			record(t, row)
			srv := redistest.Start(t)
			lk := newSingle(t, redistest.NodeFor(t, client, srv.Addr()), option.TTL(time.Second))
			redistest.Warm(t, lk)
			srv.Kill()
			res := newResource()
			ok, ttf, _, errs := attempts(t, lk, res, "k", tries)
			res.fill(t, row)
			row.Acquired, row.Attempts, row.TimeToFailMs = Int(ok), Int(tries), ttf
			row.Observed = fmt.Sprintf("%s (connection refused)", errKinds(errs))
			if ok != 0 {
				t.Errorf("dead node: %d of %d granted; want none", ok, tries)
			}
		})
	})
}
