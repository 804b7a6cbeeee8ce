// Package faults measures the trade between the two strategies under the
// faults the design names: a failover that loses a claim, dead nodes, a hung
// node and its ghost writes, a paused holder, a clock that jumps or runs
// fast, a restart without persistence, and a slow network. Each scenario is
// a Go test in this package, against real redis-server processes, that
// feeds its holders' grants and writes to a safety.Resource and asserts the
// outcome this package's results table states.
//
// The tests run with the rest of the suite (go test ./...). Run with
// -args -results DIR, they also write the table of what they observed to
// DIR/faults.md and DIR/faults.json:
//
//	go test -race -count=1 ./internal/testkit/faults -args -results ../../docs/results
//
// (scripts/faults.sh runs exactly that from the repository root).
package faults

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Row is what one run of one scenario observed. Counts a scenario does not
// measure are nil, and shown as "–".
type Row struct {
	Scenario string `json:"scenario"` // "1 failover race", ...
	Variant  string `json:"variant"`  // the knob the scenario turns, or ""
	Strategy string `json:"strategy"` // "single", "quorum" or "quorum-notokens"
	Client   string `json:"client"`   // "go-redis" or "valkey-go"
	Expected string `json:"expected"` // the outcome the test asserts, in words

	// Holders is the number of distinct leases granted.
	Holders *int `json:"holders"`
	// Overlaps counts pairs of holders valid at once by their own clocks
	// (safety.Report.Overlaps).
	Overlaps *int `json:"overlaps"`
	// StaleAccepted counts fenced writes accepted from a holder another
	// holder had superseded, whatever the tokens say: the larger of
	// safety.Report.StaleAccepted (a write after a newer holder's accepted
	// one) and the writes made after a newer grant.
	StaleAccepted *int `json:"stale_accepted"`
	// UnfencedDoubleWrites counts writes a superseded holder got accepted
	// by a resource that knows nothing of tokens.
	UnfencedDoubleWrites *int `json:"unfenced_double_writes"`
	// FencedRefused counts fenced writes the fence refused.
	FencedRefused *int `json:"fenced_refused"`
	// Acquired of Attempts is the availability.
	Acquired *int `json:"acquired"`
	Attempts *int `json:"attempts"`
	// TimeToFailMs is the median duration of the failed attempts.
	TimeToFailMs *float64 `json:"time_to_fail_ms"`
	// Observed says in words what the numbers do not: tokens, reasons.
	Observed string `json:"observed"`
	// Pass is whether the test asserting Expected passed.
	Pass bool `json:"pass"`
}

// Int returns a pointer to n, for Row's optional counts.
func Int(n int) *int { return &n }

// Ms returns a pointer to ms rounded to 0.1, for Row.TimeToFailMs.
func Ms(ms float64) *float64 {
	r := float64(int64(ms*10+0.5)) / 10
	return &r
}

// Table gathers rows from tests running in parallel. The zero Table is
// ready to use.
type Table struct {
	mu   sync.Mutex
	rows []Row
}

// Add appends r.
func (t *Table) Add(r Row) {
	t.mu.Lock()
	t.rows = append(t.rows, r)
	t.mu.Unlock()
}

// Rows returns the rows in a stable order: by scenario, variant, strategy
// and client, whatever order the tests finished in.
func (t *Table) Rows() []Row {
	t.mu.Lock()
	rows := slices.Clone(t.rows)
	t.mu.Unlock()
	slices.SortStableFunc(rows, func(a, b Row) int {
		return cmp.Or(
			cmp.Compare(scenarioNum(a.Scenario), scenarioNum(b.Scenario)),
			cmp.Compare(a.Scenario, b.Scenario),
			cmp.Compare(a.Strategy, b.Strategy),
			cmp.Compare(a.Variant, b.Variant),
			cmp.Compare(a.Client, b.Client))
	})
	return rows
}

func scenarioNum(s string) int {
	n, _ := strconv.Atoi(strings.Fields(s + " x")[0])
	return n
}

// JSON returns the rows as an indented JSON array.
func (t *Table) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(t.Rows(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Markdown returns the rows as a Markdown table.
func (t *Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| scenario | variant | strategy | client | expected | holders | overlaps | stale accepted | unfenced double writes | fenced refused | availability | time to fail (ms) | observed | pass |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range t.Rows() {
		avail := "–"
		if r.Attempts != nil && r.Acquired != nil {
			avail = fmt.Sprintf("%d/%d", *r.Acquired, *r.Attempts)
		}
		ttf := "–"
		if r.TimeToFailMs != nil {
			ttf = strconv.FormatFloat(*r.TimeToFailMs, 'f', 1, 64)
		}
		pass := "FAIL"
		if r.Pass {
			pass = "pass"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Scenario), cell(r.Variant), r.Strategy, r.Client, cell(r.Expected),
			num(r.Holders), num(r.Overlaps), num(r.StaleAccepted), num(r.UnfencedDoubleWrites), num(r.FencedRefused),
			avail, ttf, cell(r.Observed), pass)
	}
	return b.String()
}

func num(n *int) string {
	if n == nil {
		return "–"
	}
	return strconv.Itoa(*n)
}

// cell keeps a value from breaking the table.
func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
