// Package sqlfence fences writes to a SQL database: a write made under a
// lease carries the lease's token, and the database refuses it, in the
// statement that would have made it, when a larger token has already
// written there. It is the rule of docs/fencing.md, kept where the data is.
//
// Two shapes, as in docs/fencing.md:
//
//   - Table: each row carries the token it was last written under, in a
//     BIGINT column. Update and Upsert write a row only when the token
//     given is at least the row's.
//   - Fences: one row per resource in a table of fences, raised by Raise
//     as the first statement of a transaction that then writes any number
//     of tables.
//
// A refused write is an error that matches fence.ErrStale with errors.Is,
// and errors.As finds in it a *fence.StaleError whose Highest is the
// token the row held, read in the same transaction as the refusal. A
// refused write changes nothing. The zero Token is always refused, as by
// fence.Guard; a token above math.MaxInt64 does not fit a BIGINT and is
// refused with a *lease.ArgError before anything is sent.
//
// # What the database must give
//
// The statements are PostgreSQL's ($1 parameters, ON CONFLICT), through
// any database/sql driver for it (pgx's stdlib, lib/pq); the package
// imports none. Comparison and write are one statement (UPDATE ... WHERE
// token <= $1, or INSERT ... ON CONFLICT DO UPDATE ... WHERE), and the row
// lock that statement takes, held until the transaction ends, is what
// keeps an older token from landing after a newer one. The database must
// lock a row it writes until commit, and must not write a row whose
// condition it checked against an older version than the newest
// committed: PostgreSQL checks it again against the newest under READ
// COMMITTED (its default, and what READ UNCOMMITTED gives), and fails the
// statement under REPEATABLE READ and SERIALIZABLE. All three levels are
// allowed. Under the last two, a writer whose snapshot predates a
// concurrent writer's commit fails with a serialization failure (SQLSTATE
// 40001), an error of the driver's that is not ErrStale: retry the
// transaction, as for any serialization failure; the retry sees the newer
// token and is refused if it is stale.
//
// # What it does not protect
//
// Only writes made through these statements are fenced. A reader that
// ignores the token still reads whatever was committed last, by any
// holder, and a paused holder may still read; a statement that writes a
// fenced row without the condition, or a transaction that writes the
// tables a Fences row guards without raising it first, lands whatever its
// token. Tokens order the leases of one lock key: give a row or a fence
// the tokens of one key only.
//
// # Dependencies
//
// The package's tests run against a real PostgreSQL (started by
// internal/testkit/pgtest) through github.com/jackc/pgx/v5/stdlib, a
// requirement of dlock's go.mod that only test files, the test harness
// and the dlock command's demo import. A program that imports sqlfence
// does not build pgx, and go mod tidy adds no requirement of it to the
// program's go.mod; the program's go.sum lists pgx's checksum, as it
// lists those of dlock's other test dependencies, for go test of the
// packages it imports.
package sqlfence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/argerr"
)

// Set is the columns a write sets, by name, and their values. The
// statements name the columns in sorted order.
type Set map[string]any

// Table is a table whose rows carry the token they were last written
// under. Its names are written into the statements as given: quote them
// as SQL needs, and never take them from a request.
type Table struct {
	// Name is the table, as SQL names it: reports, "Reports", app.reports.
	Name string
	// Key is its key column: a primary key or unique constraint of one
	// column, which Upsert's ON CONFLICT names.
	Key string
	// Token is the column that holds the row's token, a BIGINT NOT NULL;
	// "" means token. A new row's token may be 0, which any token above
	// it overwrites.
	Token string
}

// Update sets the columns of set in the row whose key is key, and its
// token to t, in a transaction of its own at the database's default
// isolation level, when t is at least the row's token. See UpdateTx.
func (tb Table) Update(ctx context.Context, db *sql.DB, key any, t fence.Token, set Set) error {
	return inTx(ctx, db, func(tx *sql.Tx) error { return tb.UpdateTx(ctx, tx, key, t, set) })
}

// UpdateTx is Update in tx:
//
//	UPDATE reports SET body = $3, token = $1 WHERE id = $2 AND token <= $1
//
// It returns nil when the row was written; an error matching
// fence.ErrStale, the row unchanged, when its token is larger than t (or t
// is 0); an error matching sql.ErrNoRows when no row has key (and t is
// not 0). When it writes, tx holds the row's lock until it ends: a
// transaction that goes on to write elsewhere under the same lease is
// ordered with the row's other writers.
func (tb Table) UpdateTx(ctx context.Context, tx *sql.Tx, key any, t fence.Token, set Set) error {
	tok, cols, err := tb.check(t, set)
	if err != nil {
		return err
	}
	if t != 0 {
		if done, err := wrote(tx.ExecContext(ctx, tb.updateSQL(tok, cols), args(t, key, set, cols)...)); done || err != nil {
			return err
		}
	}
	return tb.refuse(ctx, tx, key, t)
}

// updateSQL is UpdateTx's statement for cols, with the token tok: $1 is
// the token, $2 the key, $3 on the columns, as args orders them.
func (tb Table) updateSQL(tok string, cols []string) string {
	var assign []string
	for i, c := range cols {
		assign = append(assign, c+" = $"+strconv.Itoa(i+3))
	}
	assign = append(assign, tok+" = $1")
	return "UPDATE " + tb.Name + " SET " + strings.Join(assign, ", ") +
		" WHERE " + tb.Key + " = $2 AND " + tok + " <= $1"
}

// args are the statements' arguments: the token, the key, then the
// values of cols.
func args(t fence.Token, key any, set Set, cols []string) []any {
	a := []any{int64(t), key}
	for _, c := range cols {
		a = append(a, set[c])
	}
	return a
}

// Upsert is UpsertTx in a transaction of its own at the database's
// default isolation level.
func (tb Table) Upsert(ctx context.Context, db *sql.DB, key any, t fence.Token, set Set) error {
	return inTx(ctx, db, func(tx *sql.Tx) error { return tb.UpsertTx(ctx, tx, key, t, set) })
}

// UpsertTx inserts the row whose key is key with the columns of set and
// token t, or, when the key is taken, writes them over that row when t is
// at least its token:
//
//	INSERT INTO reports (id, body, token) VALUES ($2, $3, $1)
//	ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token
//	 WHERE reports.token <= EXCLUDED.token
//
// It returns nil when the row was written, and an error matching
// fence.ErrStale, the row unchanged, when its token is larger than t (or t
// is 0). tx holds the row's lock until it ends, whether it wrote or not.
func (tb Table) UpsertTx(ctx context.Context, tx *sql.Tx, key any, t fence.Token, set Set) error {
	tok, cols, err := tb.check(t, set)
	if err != nil {
		return err
	}
	if t != 0 {
		if done, err := wrote(tx.ExecContext(ctx, tb.upsertSQL(tok, cols), args(t, key, set, cols)...)); done || err != nil {
			return err
		}
	}
	return tb.refuse(ctx, tx, key, t)
}

// upsertSQL is UpsertTx's statement for cols, with the token tok, its
// arguments as updateSQL's.
func (tb Table) upsertSQL(tok string, cols []string) string {
	names, params, assign := []string{tb.Key}, []string{"$2"}, []string{}
	for i, c := range cols {
		names = append(names, c)
		params = append(params, "$"+strconv.Itoa(i+3))
		assign = append(assign, c+" = EXCLUDED."+c)
	}
	names, params = append(names, tok), append(params, "$1")
	assign = append(assign, tok+" = EXCLUDED."+tok)
	return "INSERT INTO " + tb.Name + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(params, ", ") + ")" +
		" ON CONFLICT (" + tb.Key + ") DO UPDATE SET " + strings.Join(assign, ", ") +
		" WHERE " + tb.Name + "." + tok + " <= EXCLUDED." + tok
}

// check returns the token column's name and set's columns in order, or
// an *argerr.Error for what no statement could be built from.
func (tb Table) check(t fence.Token, set Set) (tok string, cols []string, err error) {
	if err := checkToken(t); err != nil {
		return "", nil, err
	}
	if tb.Name == "" || tb.Key == "" {
		return "", nil, &argerr.Error{Arg: "Table", Value: tb, Rule: "must name the table and its key column"}
	}
	tok = tb.Token
	if tok == "" {
		tok = "token"
	}
	for c := range set {
		if c == "" || c == tb.Key || c == tok {
			return "", nil, &argerr.Error{Arg: "set", Value: c,
				Rule: "must name columns other than the key and the token, which the write sets itself"}
		}
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return tok, cols, nil
}

// refuse reads, in tx, the token of the row that a write under t did not
// change, and returns the write's error: stale when the row holds a
// larger token, no row when there is none.
func (tb Table) refuse(ctx context.Context, tx *sql.Tx, key any, t fence.Token) error {
	tok := cmp.Or(tb.Token, "token")
	resource := tb.Name + "/" + fmt.Sprint(key)
	var h int64
	err := tx.QueryRowContext(ctx, "SELECT "+tok+" FROM "+tb.Name+" WHERE "+tb.Key+" = $1", key).Scan(&h)
	if t == 0 && errors.Is(err, sql.ErrNoRows) {
		h, err = 0, nil // no row: the zero token is refused all the same
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlfence: no row %s to update: %w", resource, err)
	}
	if err != nil {
		return err
	}
	if t != 0 && fence.Token(h) <= t {
		// The statement found no row, and one with an older token was
		// committed since (READ COMMITTED reads it): nothing was written.
		return fmt.Errorf("sqlfence: no row %s when the update ran: %w", resource, sql.ErrNoRows)
	}
	return &fence.StaleError{Resource: resource, Token: t, Highest: fence.Token(h)}
}

// Fences is a table of fence rows, one per resource:
//
//	CREATE TABLE fences (name TEXT PRIMARY KEY, token BIGINT NOT NULL)
//
// A transaction that writes a resource's data in any number of tables
// raises the resource's fence first (Raise), and rolls back when Raise
// fails. The row lock Raise takes, held until commit, orders the
// resource's transactions: an older holder's transaction that raises
// after a newer one has committed is refused, and one that raises while a
// newer one is open waits for it, then is refused.
type Fences struct {
	// Table is the fences' table, as SQL names it; "" means fences. Its
	// columns are name and token.
	Table string
}

// Raise raises the fence of resource in tx to t, creating its row when
// there is none, when t is at least the fence's token:
//
//	INSERT INTO fences (name, token) VALUES ($1, $2)
//	ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token
//	 WHERE fences.token <= EXCLUDED.token
//
// Call it as tx's first statement, so that under REPEATABLE READ and
// SERIALIZABLE the transaction's snapshot is taken with the fence held,
// and so that nothing is written before it. It returns nil when the fence
// holds t, and an error matching fence.ErrStale when it holds a larger
// token (or t is 0): roll tx back then.
func (f Fences) Raise(ctx context.Context, tx *sql.Tx, resource string, t fence.Token) error {
	if err := checkToken(t); err != nil {
		return err
	}
	table := cmp.Or(f.Table, "fences")
	if t != 0 {
		if done, err := wrote(tx.ExecContext(ctx, raiseSQL(table), resource, int64(t))); done || err != nil {
			return err
		}
	}
	var h int64
	err := tx.QueryRowContext(ctx, "SELECT token FROM "+table+" WHERE name = $1", resource).Scan(&h)
	if t == 0 && errors.Is(err, sql.ErrNoRows) {
		h, err = 0, nil // no fence yet: the zero token is refused all the same
	}
	if err != nil {
		return err
	}
	return &fence.StaleError{Resource: resource, Token: t, Highest: fence.Token(h)}
}

// raiseSQL is Raise's statement on table: $1 is the resource, $2 the
// token.
func raiseSQL(table string) string {
	return "INSERT INTO " + table + " (name, token) VALUES ($1, $2)" +
		" ON CONFLICT (name) DO UPDATE SET token = EXCLUDED.token" +
		" WHERE " + table + ".token <= EXCLUDED.token"
}

// wrote reports whether the statement whose result is r wrote one row.
// More than one is an error: the key named several rows.
func wrote(r sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, err
	}
	if n > 1 {
		return false, fmt.Errorf("sqlfence: a fenced write changed %d rows: its key column is not unique", n)
	}
	return n == 1, nil
}

// checkToken refuses a token that does not fit a BIGINT.
func checkToken(t fence.Token) error {
	if t > math.MaxInt64 {
		return &argerr.Error{Arg: "t", Value: t, Rule: "must fit a BIGINT (at most math.MaxInt64)"}
	}
	return nil
}

// inTx runs fn in a transaction on db, and commits it when fn returns nil.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	if err := argerr.CheckContext(ctx); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
