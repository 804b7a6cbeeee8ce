package nemesis

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/internal/testkit/pgtest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

var (
	seedFlag     = flag.Int64("nemesis.seed", 0, "seed of the schedule and the workload (0: a random one, printed)")
	durationFlag = flag.Duration("nemesis.duration", 0, "length of the fault phase (0: the short mode's "+shortDuration.String()+")")
	reportFlag   = flag.String("nemesis.report", "", "directory to write the report to, NAME.md and NAME.json (none when empty)")
	nameFlag     = flag.String("nemesis.name", "soak", "the report's file name, without .md or .json")
	plantFlag    = flag.String("nemesis.plant", "", "a bug to plant in TestNemesis's runs: "+strings.Join(Plants, " or ")+" (none when empty)")
)

// shortDuration is the fault phase of the short mode, the one the normal
// suite runs.
const shortDuration = 20 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	// Each run computes as much as it waits (faults, workers, checks):
	// two at a time at most, whatever -test.parallel the suite gives the
	// packages whose tests only wait.
	if p := flag.Lookup("test.parallel"); p != nil && p.Value.String() != "1" {
		_ = p.Value.Set("2")
	}
	code := pgtest.Main(m).Run()
	if code == 0 {
		// go-redis redials a dead server from a goroutine of its pool that
		// checks for the client's Close once a second. Toxiproxy v2.5.0
		// leaves a connection's toxic stubs, and the reader that feeds
		// them, blocked for good on a send when a timeout or reset_peer
		// toxic closed the connection under them and toxics were then
		// removed: its own leak, per connection, holding no resource of
		// ours (the proxies themselves stop, and are still checked).
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "nemesis: goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// seed returns the seed flag, or a fresh random seed when it is 0.
func seed(t *testing.T) int64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	var b [8]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// planMargin is the least share of a run in which the plans of a fresh
// seed of TestNemesis must judge each property: a few seeds in a thousand
// plan storms that leave too little calm for a short run to be judged
// (the single strategy's HANDLE or RATE floor under half, as
// TestPlanJudges counts them), and TestNemesis would fail such a run as
// underjudged, whatever the code under test did.
const planMargin = MinJudged + 0.05

// judgedSeed returns the seed flag, or a fresh random seed whose plans,
// both strategies', judge every property in at least planMargin of the
// run. A replayed seed is taken as it is.
func judgedSeed(t *testing.T) int64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	for range 100 {
		s := seed(t)
		short := underplanned(s, duration())
		if short == "" {
			return s
		}
		t.Logf("seed %d plans too little judged (%s): drawn again", s, short)
	}
	t.Fatalf("100 seeds in a row plan too little judged")
	return 0
}

// underplanned names the first property that seed's plans for runs of d,
// either strategy's, judge in less than planMargin; "" when none.
func underplanned(seed int64, d time.Duration) string {
	for _, strategy := range []string{Quorum, Single} {
		judged := plannedJudged(NewPlan(seed, strategy, d, NoBias))
		for _, prop := range Properties {
			if j, ok := judged[prop]; ok && j < planMargin {
				return fmt.Sprintf("%s %s %.0f%%", strategy, prop, 100*j)
			}
		}
	}
	return ""
}

func duration() time.Duration {
	if *durationFlag > 0 {
		return *durationFlag
	}
	return shortDuration
}

// replay is the command that runs test (a -run pattern) again with seed.
func replay(run string, seed int64) string {
	cmd := fmt.Sprintf("go test ./internal/testkit/nemesis -count=1 -run '%s' -args -nemesis.seed=%d", run, seed)
	if server := os.Getenv("DLOCK_SERVER"); server != "" {
		cmd = "DLOCK_SERVER=" + server + " " + cmd
	}
	if *durationFlag > 0 {
		cmd += " -nemesis.duration=" + durationFlag.String()
	}
	if *plantFlag != "" {
		cmd += " -nemesis.plant=" + *plantFlag
	}
	return cmd
}

// TestNemesis runs both strategies under the random mix of faults, in
// parallel, and holds each to exactly the promises the package doc's table
// says it makes: no promise broken, LIVE within its bound, MEM within its
// bound. It runs before the package's parallel tests, not beside them:
// the RATE floor holds a limit to a share of its rate where no fault
// stands in its way, and eight catch runs beside it starve two cores
// until a quorum's node calls time out in the calm.
func TestNemesis(t *testing.T) {
	s := judgedSeed(t)
	t.Logf("seed %d (replay: %s)", s, replay("TestNemesis$", s))
	var mu sync.Mutex
	var results []*Result
	if *reportFlag != "" {
		rev := commit()
		t.Cleanup(func() {
			if err := writeReport(*reportFlag, *nameFlag, rev, s, duration(), results); err != nil {
				t.Errorf("nemesis report: %v", err)
			}
		})
	}
	for _, strategy := range []string{Quorum, Single} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			res := Run(t, Config{Strategy: strategy, Seed: s, Duration: duration(), Plant: *plantFlag, SQL: true,
				Replay: replay("TestNemesis$/"+strategy+"$", s)})
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
			t.Log(res.Summary())
			var failed []string
			for _, prop := range Properties {
				if prop == safety.RateFloor && raceDetector == 1 {
					// A share of a limit's rate is a measure of speed,
					// which the race detector distorts as it does
					// allocation counts: with the callers at full pace
					// the quorum's node calls timed out in the calm (3 of
					// 5 past a 214 ms node timeout, 0-22% of the ideal
					// admitted, seen). The floor fails the runs without
					// it: the suite's Valkey run of the short mode and
					// the soaks.
					if n := res.BrokenBy(prop); n > 0 {
						t.Logf("%s: RATE floor short %d times under the race detector: reported, not failed on", strategy, n)
					}
					continue
				}
				if n := res.BrokenBy(prop); n > 0 {
					failed = append(failed, fmt.Sprintf("%s broken %d times", prop, n))
				}
			}
			if !res.LiveOK {
				failed = append(failed, "LIVE: a key not acquirable within "+res.LiveBound+" of healing")
			}
			if res.MemChecked && !res.MemOK {
				failed = append(failed, fmt.Sprintf("MEM: a key above %d B on a server", MemBound))
			}
			if len(res.Errors) > 0 {
				failed = append(failed, "harness errors")
			}
			// A schedule whose windows excuse a property most of the time
			// does not test it.
			failed = append(failed, res.Underjudged()...)
			if len(failed) > 0 {
				t.Errorf("%s: %s\nreplay: %s", strategy, strings.Join(failed, "; "), res.Replay)
			}
		})
	}
}

// TestNemesisCatches shows that the nemesis can fail: with the lost-data
// guard off on servers that are not durable, it finds two holders at once
// (ME); with resources that do not check tokens, it finds a paused holder's
// late write accepted (FENCE); with a single lock whose claim takes a
// lease for free in its last 50 ms, or a quorum whose vote does in the
// lock's last 100 ms (early-vote), it finds the waiter let in beside the
// holder (ME); with the PostgreSQL register written without the token
// condition (sql-unfenced), the table's log holds a stale write landed. The schedules are biased toward the fault
// each needs, so that the violation is all but certain.
func TestNemesisCatches(t *testing.T) {
	t.Parallel()
	s := seed(t)
	cases := []struct {
		name     string
		cfg      Config
		property safety.Property
	}{
		{"guard-off", Config{Strategy: Quorum, Bias: LoseMajority, GuardOff: true}, safety.MutualExclusion},
		{"unfenced", Config{Strategy: Single, Bias: PauseHolders, Unfenced: true}, safety.Fencing},
		{"early-grant", Config{Strategy: Single, Bias: ExpireHolders, EarlyGrant: true}, safety.MutualExclusion},
		{"early-vote", Config{Strategy: Quorum, Bias: ExpireQueued, EarlyGrant: true}, safety.MutualExclusion},
		{"unraised-readers", Config{Strategy: Single, Bias: UnraisedReaders}, safety.Fencing},
		// The default mix, with a planted bug.
		{"rate-one-yes", Config{Strategy: Quorum, Plant: PlantRateOneYes}, safety.Rate},
		{"trusting-resume", Config{Strategy: Single, Plant: PlantTrustingResume}, safety.Handle},
		{"rate-stingy", Config{Strategy: Quorum, Plant: PlantRateStingy}, safety.RateFloor},
		// The PostgreSQL register written without the helper's condition:
		// caught by the table's own log (SQLStats.Broken), not only by the
		// workers' record.
		{"sql-unfenced", Config{Strategy: Single, Bias: PauseHolders, Plant: PlantSQLUnfenced}, safety.Fencing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A schedule may miss, when a loaded machine runs few
			// acquisitions between the faults: up to catchRounds seeds
			// in a row, and the first that catches the violation ends
			// the test. All of them missing fails it.
			var (
				res *Result
				cfg Config
			)
			for round := range int64(catchRounds) {
				cfg = c.cfg
				cfg.Seed, cfg.Duration, cfg.SkipMem = s+round, catchDuration, true
				cfg.Replay = replay("TestNemesisCatches/"+c.name+"$", cfg.Seed)
				res = Run(t, cfg)
				t.Log(res.Summary())
				if caught(res, c.cfg, c.property) || len(res.Errors) > 0 {
					break
				}
			}
			sum := res.Summary()
			if !caught(res, c.cfg, c.property) {
				t.Errorf("%s: no %s violation found in %d schedules; the nemesis must catch a switched-off %s\nreplay: %s", c.name, c.property, catchRounds, c.property, cfg.Replay)
			}
			for _, want := range []string{fmt.Sprintf("seed %d", cfg.Seed), string(c.property) + ": ", "-nemesis.seed=" + fmt.Sprint(cfg.Seed)} {
				if !strings.Contains(sum, want) {
					t.Errorf("%s: the report does not say %q:\n%s", c.name, want, sum)
				}
			}
			if len(res.Errors) > 0 {
				t.Errorf("%s: harness errors: %q", c.name, res.Errors)
			}
			if c.cfg.EarlyGrant && res.EarlyClaims == 0 {
				t.Errorf("%s: no claim ran with the early grant", c.name)
			}
		})
	}
}

// caught says whether res found the violation of prop cfg's switch
// causes: with the SQL plant, a finding of the PostgreSQL register's log.
func caught(res *Result, cfg Config, prop safety.Property) bool {
	if cfg.Plant == PlantSQLUnfenced {
		return res.SQL != nil && res.SQL.Broken > 0
	}
	return res.BrokenBy(prop) > 0
}

// TestNemesisRestoreMajority runs the quorum under the fault the review
// found it failed: three of five servers restored from an RDB snapshot
// taken moments before, again and again, while keys are held. The
// lost-data guard must keep mutual exclusion and the token order: the
// restored servers sit out. (Before the guard told a restart by the
// server's run_id, this schedule found two holders at once in every run.)
func TestNemesisRestoreMajority(t *testing.T) {
	t.Parallel()
	s := seed(t)
	cfg := Config{Strategy: Quorum, Bias: RestoreMajority, Seed: s, Duration: catchDuration, SkipMem: true,
		Replay: replay("TestNemesisRestoreMajority$", s)}
	res := Run(t, cfg)
	t.Log(res.Summary())
	for _, p := range []safety.Property{safety.MutualExclusion, safety.Order, safety.Fencing} {
		if n := res.BrokenBy(p); n > 0 {
			t.Errorf("%s: %d broken under restores of a majority\nreplay: %s", p, n, cfg.Replay)
		}
	}
	if !res.LiveOK || len(res.Errors) > 0 {
		t.Errorf("LIVE %v, harness errors %q\nreplay: %s", res.LiveOK, res.Errors, cfg.Replay)
	}
}

// catchDuration is the fault phase of TestNemesisCatches, and catchRounds
// the most schedules it tries.
const (
	catchDuration = 12 * time.Second
	catchRounds   = 3
)
