package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/sqlfence"
	"github.com/dlockgo/dlock/internal/testkit/pgtest"
	"github.com/dlockgo/dlock/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.ForExamples(m)) }

const schema = `
CREATE TABLE reports (id INT PRIMARY KEY, body TEXT NOT NULL DEFAULT '', token BIGINT NOT NULL DEFAULT 0);
CREATE TABLE fences (name TEXT PRIMARY KEY, token BIGINT NOT NULL);
CREATE TABLE lines (report INT NOT NULL, line TEXT NOT NULL);
CREATE TABLE history (seq BIGSERIAL PRIMARY KEY, writer INT NOT NULL, token BIGINT NOT NULL);`

var reports = sqlfence.Table{Name: "reports", Key: "id"}

// newDB returns a database of the test's own with the tables above.
func newDB(t *testing.T) *sql.DB {
	t.Helper()
	db := pgtest.DB(t)
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return db
}

// outcome says how a write ended: "ok", "stale <highest>", "no row",
// "invalid", or the error.
func outcome(err error) string {
	var se *fence.StaleError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se) && errors.Is(err, fence.ErrStale):
		return fmt.Sprintf("stale %d", se.Highest)
	case errors.Is(err, sql.ErrNoRows):
		return "no row"
	case errors.Is(err, lease.ErrInvalid):
		return "invalid"
	}
	return err.Error()
}

// row returns the body and token of report id.
func row(t *testing.T, db *sql.DB, id int) (string, int64) {
	t.Helper()
	var body string
	var tok int64
	if err := db.QueryRow("SELECT body, token FROM reports WHERE id = $1", id).Scan(&body, &tok); err != nil {
		t.Fatal(err)
	}
	return body, tok
}

type write struct {
	id    int
	token fence.Token
	body  string
	want  string // outcome
}

// steps runs each write through fn and checks its outcome.
func steps(t *testing.T, db *sql.DB, fn func(context.Context, *sql.DB, any, fence.Token, sqlfence.Set) error, writes []write) {
	t.Helper()
	for _, w := range writes {
		err := fn(context.Background(), db, w.id, w.token, sqlfence.Set{"body": w.body})
		if got := outcome(err); got != w.want {
			t.Errorf("write %d to %d: %s (%v); want %s", w.token, w.id, got, err, w.want)
		}
	}
}

func TestUpdate(t *testing.T) {
	db := newDB(t)
	if _, err := db.Exec("INSERT INTO reports (id) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	steps(t, db, reports.Update, []write{
		{1, 33, "a", "ok"},
		{1, 34, "b", "ok"},
		{1, 33, "late", "stale 34"},
		{1, 34, "b again", "ok"}, // the current holder writes again
		{1, 0, "zero", "stale 34"},
		{2, 35, "nowhere", "no row"},
		{2, 0, "nowhere", "stale 0"},
		{1, math.MaxInt64 + 1, "too big", "invalid"},
	})
	if body, tok := row(t, db, 1); body != "b again" || tok != 34 {
		t.Errorf("row 1 = %q, %d; want \"b again\", 34", body, tok)
	}
	// No column but the token: the row's fence alone is raised.
	if err := reports.Update(context.Background(), db, 1, 35, nil); err != nil {
		t.Errorf("a write of the token alone: %v", err)
	}
	if err := reports.Upsert(context.Background(), db, 1, 36, nil); err != nil {
		t.Errorf("an upsert of the token alone: %v", err)
	}
	if body, tok := row(t, db, 1); body != "b again" || tok != 36 {
		t.Errorf("row 1 = %q, %d; want \"b again\", 36", body, tok)
	}
}

func TestUpsert(t *testing.T) {
	db := newDB(t)
	steps(t, db, reports.Upsert, []write{
		{1, 33, "a", "ok"}, // inserted
		{1, 32, "late", "stale 33"},
		{1, 33, "a again", "ok"},
		{1, 40, "b", "ok"},
		{1, 0, "zero", "stale 40"},
		{2, 0, "zero", "stale 0"},
		{2, math.MaxInt64 + 1, "too big", "invalid"},
	})
	if body, tok := row(t, db, 1); body != "b" || tok != 40 {
		t.Errorf("row 1 = %q, %d; want b, 40", body, tok)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM reports").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows, %v; want 1", n, err)
	}
	err := reports.Upsert(context.Background(), db, 3, 50, sqlfence.Set{"token": 1})
	if !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("a set naming the token column: %v; want lease.ErrInvalid", err)
	}
}

// A transaction that raises the fence and writes two tables lands whole;
// an older token's is refused at its first statement and rolled back.
func TestFences(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	var fences sqlfence.Fences
	write := func(tok fence.Token, line string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := fences.Raise(ctx, tx, "report:1", tok); err != nil {
			return err
		}
		if _, err := tx.Exec("INSERT INTO lines VALUES (1, $1)", line); err != nil {
			t.Fatal(err)
		}
		if err := reports.UpsertTx(ctx, tx, 1, tok, sqlfence.Set{"body": line}); err != nil {
			t.Fatal(err)
		}
		return tx.Commit()
	}
	for _, w := range []struct {
		token fence.Token
		want  string
	}{{33, "ok"}, {32, "stale 33"}, {0, "stale 33"}, {33, "ok"}, {34, "ok"}, {33, "stale 34"}} {
		if got := outcome(write(w.token, fmt.Sprint("under ", w.token))); got != w.want {
			t.Errorf("write under %d: %s; want %s", w.token, got, w.want)
		}
	}
	var lines int
	if err := db.QueryRow("SELECT count(*) FROM lines").Scan(&lines); err != nil || lines != 3 {
		t.Errorf("%d lines, %v; want 3 (the writes admitted)", lines, err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if got := outcome(fences.Raise(ctx, tx, "report:2", 0)); got != "stale 0" {
		t.Errorf("the zero token, no fence yet: %s; want stale 0", got)
	}
}

// Raise holds the fence until commit: a newer holder's transaction waits
// for an older one's to end, and an older one that raises while a newer
// one is open waits for it, then is refused.
func TestFencesWait(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	var fences sqlfence.Fences
	begin := func(tok fence.Token) (*sql.Tx, chan error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		done := make(chan error, 1)
		go func() { done <- fences.Raise(ctx, tx, "report", tok) }()
		return tx, done
	}
	waits := func(done chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s returned %v while the other transaction held the fence", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, c := range []struct {
		first, second fence.Token
		want          string
	}{{40, 41, "ok"}, {50, 45, "stale 50"}} {
		tx1, done1 := begin(c.first)
		if err := <-done1; err != nil {
			t.Fatal(err)
		}
		tx2, done2 := begin(c.second)
		waits(done2, fmt.Sprintf("Raise(%d)", c.second))
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := outcome(<-done2); got != c.want {
			t.Errorf("Raise(%d) after %d committed: %s; want %s", c.second, c.first, got, c.want)
		}
		if err := tx2.Commit(); err != nil && c.want == "ok" {
			t.Fatal(err)
		}
	}
}

// Writers with interleaved tokens, at every isolation level the package
// allows, through each shape: in the order the writes committed (the
// history's sequence, drawn while the row lock is held), tokens never go
// down, and every refusal names a larger token than its own.
func TestConcurrent(t *testing.T) {
	shapes := map[string]func(context.Context, *sql.Tx, fence.Token) error{
		"update": func(ctx context.Context, tx *sql.Tx, tok fence.Token) error {
			return reports.UpdateTx(ctx, tx, 1, tok, sqlfence.Set{"body": fmt.Sprint(tok)})
		},
		"upsert": func(ctx context.Context, tx *sql.Tx, tok fence.Token) error {
			return reports.UpsertTx(ctx, tx, 1, tok, sqlfence.Set{"body": fmt.Sprint(tok)})
		},
		"fences": func(ctx context.Context, tx *sql.Tx, tok fence.Token) error {
			return sqlfence.Fences{}.Raise(ctx, tx, "report", tok)
		},
	}
	levels := []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable}
	for _, level := range levels {
		for _, shape := range []string{"update", "upsert", "fences"} {
			t.Run(fmt.Sprintf("%s/%s", shape, level), func(t *testing.T) {
				concurrent(t, shapes[shape], level, shape == "update")
			})
		}
	}
}

func concurrent(t *testing.T, write func(context.Context, *sql.Tx, fence.Token) error, level sql.IsolationLevel, seed bool) {
	const writers, each = 4, 10
	db := newDB(t)
	ctx := context.Background()
	if seed {
		if _, err := db.Exec("INSERT INTO reports (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu                        sync.Mutex
		admitted, stale, conflict int
	)
	// Rounds, the writers of one started together, so that their tokens
	// meet at the row lock in any order.
	for i := range each {
		var round sync.WaitGroup
		for w := range writers {
			round.Go(func() {
				tok := fence.Token(i*writers + w + 1)
				got := once(ctx, db, level, w, tok, write)
				mu.Lock()
				switch {
				case got == nil:
					admitted++
				case errors.Is(got, fence.ErrStale):
					stale++
					var se *fence.StaleError
					if !errors.As(got, &se) || se.Highest <= tok || se.Token != tok {
						t.Errorf("a refusal of %d: %v; want a *fence.StaleError with a larger Highest", tok, got)
					}
				case serialization(got):
					conflict++
				default:
					t.Errorf("writer %d, token %d: %v", w, tok, got)
				}
				mu.Unlock()
			})
		}
		round.Wait()
	}
	rows, err := db.Query("SELECT token FROM history ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last, n int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Errorf("write %d landed under token %d after one under %d", n, tok, last)
		}
		last = tok
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d admitted, %d stale, %d serialization failures", admitted, stale, conflict)
	if n != int64(admitted) || admitted == 0 || stale == 0 {
		t.Errorf("%d admitted, %d in the history, %d refused; want as many admitted as in the history, and some of each", admitted, n, stale)
	}
}

// once writes under tok in a transaction at level and records the write
// in the history when it is admitted; it returns the outcome.
func once(ctx context.Context, db *sql.DB, level sql.IsolationLevel, w int, tok fence.Token, write func(context.Context, *sql.Tx, fence.Token) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := write(ctx, tx, tok); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO history (writer, token) VALUES ($1, $2)", w, int64(tok)); err != nil {
		return err
	}
	return tx.Commit()
}

// serialization reports whether err is PostgreSQL's serialization
// failure, which REPEATABLE READ and SERIALIZABLE answer a transaction
// that would write a row changed since its snapshot.
func serialization(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40001"
}

// The tables docs/fencing.md creates are the ones the helpers write: its
// CREATE TABLE statements run, and a write through each helper lands on
// them and a stale one is refused.
func TestFencingDocTables(t *testing.T) {
	b, err := os.ReadFile("../../docs/fencing.md")
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.DB(t)
	ctx := context.Background()
	created := 0
	for q := range sqlfence.Printed(string(b), false) {
		if strings.HasPrefix(q, "CREATE TABLE ") {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			created++
		}
	}
	if created != 2 {
		t.Fatalf("%d tables created; want reports and fences", created)
	}
	if err := reports.Upsert(ctx, db, 1, 42, sqlfence.Set{"body": "final"}); err != nil {
		t.Fatal(err)
	}
	if got := outcome(reports.Update(ctx, db, 1, 41, sqlfence.Set{"body": "late"})); got != "stale 42" {
		t.Errorf("a stale update: %s; want stale 42", got)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := (sqlfence.Fences{}).Raise(ctx, tx, "reports", 42); err != nil {
		t.Fatal(err)
	}
}
