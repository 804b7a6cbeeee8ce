package sqlfence_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // a PostgreSQL driver for database/sql

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/sqlfence"
)

// open returns the examples' database: DLOCK_PG_URL (the tests set it),
// or a local one.
func open() *sql.DB {
	db, err := sql.Open("pgx", cmp.Or(os.Getenv("DLOCK_PG_URL"), "postgres://localhost/dlock"))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A row that carries the token it was written under. The tokens would come
// from Lease.Token; here they are written out: the holder of 41 stalled,
// its lease ran out, and the lock went to the holder of 42.
func ExampleTable_Update() {
	db := open()
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE reports (
		id INT PRIMARY KEY, body TEXT NOT NULL, token BIGINT NOT NULL DEFAULT 0);
		INSERT INTO reports (id, body) VALUES (1, '')`); err != nil {
		log.Fatal(err)
	}
	reports := sqlfence.Table{Name: "reports", Key: "id"} // the token in column token

	fmt.Println(reports.Update(ctx, db, 1, 42, sqlfence.Set{"body": "final"}))
	err := reports.Update(ctx, db, 1, 41, sqlfence.Set{"body": "late draft"})
	var se *fence.StaleError
	if errors.As(err, &se) { // errors.Is(err, fence.ErrStale) too
		fmt.Println("refused", se.Token, "after", se.Highest)
	}
	err = reports.Update(ctx, db, 2, 42, sqlfence.Set{"body": "elsewhere"})
	fmt.Println("no such row:", errors.Is(err, sql.ErrNoRows))
	// Output:
	// <nil>
	// refused 41 after 42
	// no such row: true
}

// A row that may not exist yet: the first write inserts it.
func ExampleTable_Upsert() {
	db := open()
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE drafts (
		id INT PRIMARY KEY, body TEXT NOT NULL, token BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	drafts := sqlfence.Table{Name: "drafts", Key: "id"}

	fmt.Println(drafts.Upsert(ctx, db, 7, 42, sqlfence.Set{"body": "final"}))
	fmt.Println(drafts.Upsert(ctx, db, 7, 41, sqlfence.Set{"body": "late draft"}))
	// Output:
	// <nil>
	// dlock: stale fencing token for "drafts/7": got 41, resource has seen 42
}

// One lease guards a transaction that writes two tables: the resource's
// fence row is raised first, and its row lock orders the resource's
// transactions until commit.
func ExampleFences_Raise() {
	db := open()
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `
		CREATE TABLE fences (name TEXT PRIMARY KEY, token BIGINT NOT NULL);
		CREATE TABLE orders (id INT PRIMARY KEY, total INT NOT NULL);
		CREATE TABLE lines (order_id INT NOT NULL, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	var fences sqlfence.Fences // the table fences

	place := func(token fence.Token, order int, item string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // after Commit, a no-op
		if err := fences.Raise(ctx, tx, "orders", token); err != nil {
			return err // fence.ErrStale: nothing was written
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES ($1, 10)", order); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO lines VALUES ($1, $2)", order, item); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println(place(42, 1, "book"))
	fmt.Println(errors.Is(place(41, 2, "pen"), fence.ErrStale))
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "order")
	// Output:
	// <nil>
	// true
	// 1 order
}
