package nemesis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/sqlfence"
	"github.com/dlockgo/dlock/internal/testkit/pgtest"
	"github.com/dlockgo/dlock/internal/testkit/safety"
)

// sqlRegister is the nemesis's PostgreSQL resource (Config.SQL): each
// lock key's register is a row of a table in a real PostgreSQL (pgtest),
// written through sqlfence.Table.UpsertTx as a user's code would, and
// each write that lands is logged, in the same transaction and under the
// row's lock, to a second table, in the order the row's lock gave the
// writes. After the run, check reads that log: no write under a token
// below one already landed for its key may be in it. The log is the
// database's word, not the workers': a stale write the helper let
// through is there whatever the workers believed. The plant
// PlantSQLUnfenced writes with a plain upsert, which check must find.
type sqlRegister struct {
	db       *sql.DB
	unfenced bool

	landed, refused, failed atomic.Int64
	mu                      sync.Mutex
	answered                []time.Time // when each write that reached the database returned
	firstErr                string      // the first failed write's error
}

// sqlTable is the registers' table as sqlfence sees it.
var sqlTable = sqlfence.Table{Name: "register", Key: "key"}

// sqlWriteTimeout bounds one write's transaction.
const sqlWriteTimeout = 5 * time.Second

func newSQLRegister(t *testing.T, unfenced bool) *sqlRegister {
	t.Helper()
	db := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, stmt := range []string{
		"CREATE TABLE register (key BYTEA PRIMARY KEY, value TEXT NOT NULL, token BIGINT NOT NULL)",
		"CREATE TABLE landed (seq BIGSERIAL PRIMARY KEY, key BYTEA NOT NULL, token BIGINT NOT NULL, value TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("nemesis: the PostgreSQL register: %v", err)
		}
	}
	return &sqlRegister{db: db, unfenced: unfenced}
}

var _ safety.Register = (*sqlRegister)(nil)

// Put writes value under t to key's row and logs it, in one transaction.
func (r *sqlRegister) Put(ctx context.Context, key, value string, t fence.Token) error {
	ctx, cancel := context.WithTimeout(ctx, sqlWriteTimeout)
	defer cancel()
	err := r.put(ctx, key, value, t)
	switch {
	case err == nil:
		r.landed.Add(1)
	case errors.Is(err, fence.ErrStale):
		r.refused.Add(1)
	default:
		if r.failed.Add(1) == 1 {
			r.mu.Lock()
			r.firstErr = err.Error()
			r.mu.Unlock()
		}
		return err
	}
	r.mu.Lock()
	r.answered = append(r.answered, time.Now())
	r.mu.Unlock()
	return err
}

func (r *sqlRegister) put(ctx context.Context, key, value string, t fence.Token) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if r.unfenced {
		_, err = tx.ExecContext(ctx, `INSERT INTO register (key, value, token) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, token = EXCLUDED.token`, []byte(key), value, int64(t))
	} else {
		err = sqlTable.UpsertTx(ctx, tx, []byte(key), t, sqlfence.Set{"value": value})
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO landed (key, token, value) VALUES ($1, $2, $3)", []byte(key), int64(t), value); err != nil {
		return err
	}
	return tx.Commit()
}

// Get reads key's row.
func (r *sqlRegister) Get(ctx context.Context, key string) (string, fence.Token, bool, error) {
	var (
		value string
		t     int64
	)
	err := r.db.QueryRowContext(ctx, "SELECT value, token FROM register WHERE key = $1", []byte(key)).Scan(&value, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	return value, fence.Token(t), true, nil
}

// SQLStats is what the PostgreSQL resource saw: the writes that landed,
// those it refused as stale and those that failed otherwise, the landed
// writes found below a token already landed for their key (each a FENCE
// finding), and Judged, the share of the fault phase's seconds in which a
// write reached the database and was answered.
type SQLStats struct {
	Landed  int64 `json:"landed"`
	Refused int64 `json:"refused_stale"`
	Failed  int64 `json:"failed"`
	// FirstError is the first failed write's error.
	FirstError string  `json:"first_error,omitempty"`
	Broken     int     `json:"broken"`
	Judged     float64 `json:"judged"`
}

func (s *SQLStats) summary() string {
	first := ""
	if s.FirstError != "" {
		first = " (the first: " + s.FirstError + ")"
	}
	return fmt.Sprintf("PostgreSQL register: %d writes landed, %d refused as stale, %d failed%s; %d landed below a newer token (the table's log); a write answered in %.0f%% of the run's seconds",
		s.Landed, s.Refused, s.Failed, first, s.Broken, 100*s.Judged)
}

// check reads the landed log in its order and returns the stats and a
// FENCE finding for each write under a token below the highest already
// landed for its key. The fault phase began at t0 and lasted d.
func (r *sqlRegister) check(t0 time.Time, d time.Duration) (*SQLStats, []Finding, error) {
	st := &SQLStats{Landed: r.landed.Load(), Refused: r.refused.Load(), Failed: r.failed.Load()}
	r.mu.Lock()
	st.FirstError = r.firstErr
	seconds := map[int64]bool{}
	for _, at := range r.answered {
		if s := at.Sub(t0); s >= 0 && s < d {
			seconds[int64(s/time.Second)] = true
		}
	}
	r.mu.Unlock()
	if n := int64((d + time.Second - 1) / time.Second); n > 0 {
		st.Judged = float64(len(seconds)) / float64(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := r.db.QueryContext(ctx, "SELECT seq, key, token, value, at FROM landed ORDER BY seq")
	if err != nil {
		return st, nil, err
	}
	defer rows.Close()
	highest := map[string]int64{}
	var out []Finding
	for rows.Next() {
		var (
			seq, token int64
			key        []byte
			value      string
			at         time.Time
		)
		if err := rows.Scan(&seq, &key, &token, &value, &at); err != nil {
			return st, out, err
		}
		if h := highest[string(key)]; token < h {
			st.Broken++
			out = append(out, Finding{Key: string(key), Property: string(safety.Fencing), At: fmt.Sprintf("%+.3fs", at.Sub(t0).Seconds()),
				Detail: fmt.Sprintf("sql: write %q under token %d landed (log seq %d) after a write under token %d", value, token, seq, h)})
			continue
		}
		highest[string(key)] = token
	}
	return st, out, rows.Err()
}
