package pg_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// oneConn is a database from Open whose pool holds a single connection,
// so that what a test asks of pg_prepared_statements is about the
// connection its statements ran on.
func oneConn(t *testing.T) *sqlx.DB {
	t.Helper()
	db := testenv.DB(t)
	db.SetMaxOpenConns(1)
	return db
}

// preparedCount counts the connection's prepared statements whose text
// contains like (a LIKE pattern), leaving out the asking statement.
func preparedCount(t *testing.T, db *sqlx.DB, like string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM pg_prepared_statements
		WHERE statement LIKE $1 AND statement NOT LIKE '%pg_prepared_statements%'`, like); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAStatementIsPreparedOncePerConnection(t *testing.T) {
	db := oneConn(t)
	if _, err := db.Exec(`CREATE TABLE things (id text PRIMARY KEY, n int); INSERT INTO things VALUES ('a', 1)`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		var got int
		if err := db.Get(&got, `SELECT n + $1 FROM things WHERE id = $2`, i, "a"); err != nil || got != 1+i {
			t.Fatalf("run %d = %d, %v; want %d", i, got, err, 1+i)
		}
		if _, err := db.Exec(`UPDATE things SET n = n WHERE id = $1`, "a"); err != nil {
			t.Fatal(err)
		}
	}
	for _, like := range []string{"SELECT n + $1%", "UPDATE things%"} {
		if n := preparedCount(t, db, like); n != 1 {
			t.Errorf("prepared statements like %q = %d, want 1", like, n)
		}
	}
	// A statement without arguments goes unprepared, as lib/pq sends it:
	// several statements in one string still run.
	if _, err := db.Exec(`UPDATE things SET n = 2; UPDATE things SET n = n + 1`); err != nil {
		t.Fatal(err)
	}
	if n := preparedCount(t, db, "UPDATE things SET n = 2%"); n != 0 {
		t.Errorf("a statement without arguments was prepared (%d)", n)
	}
}

// TestPreparedValuesReadAsUnprepared reads and writes every kind of value
// the services store through Open's connections and through a plain lib/pq
// connection, and wants the same back: a prepared statement returns some
// columns (bytea, integers, uuid) in binary, which lib/pq must decode to
// what the unnamed statement's text gives.
func TestPreparedValuesReadAsUnprepared(t *testing.T) {
	ctx := context.Background()
	cached := testenv.DB(t)
	if _, err := cached.Exec(`CREATE TABLE v (id uuid PRIMARY KEY, b bytea, i8 bigint, i4 int, i2 smallint,
		t text, j jsonb, ts timestamptz, tags text[], maybe text)`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := cached.Get(&schema, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}
	// The baseline is lib/pq as Open configured it before the cache:
	// binary_parameters=yes, which asks for every result column as text.
	raw, err := pg.WithSessionDefaults(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	plain := sqlx.MustOpen("postgres", u.String()) // lib/pq's own: unnamed statements
	t.Cleanup(func() { plain.Close() })

	// One row of every kind, read back into what the stores scan into.
	ts := time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC)
	in := []any{nil, []byte{0, 1, 0xff}, int64(1) << 40, int32(-7), int16(3), "héllo", `{"a": [1, 2]}`, ts,
		pq.StringArray{"x", "y,z"}, (*string)(nil)}
	for name, db := range map[string]*sqlx.DB{"prepared": cached, "unprepared": plain} {
		t.Run(name, func(t *testing.T) {
			id := uuid.NewString()
			in[0] = id
			if _, err := db.ExecContext(ctx, `INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, in...); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the first run prepares, the second reuses
				out := []any{new(string), new([]byte), new(int64), new(int32), new(int16), new(string), new(string),
					new(time.Time), new(pq.StringArray), new(*string)}
				if err := db.QueryRowxContext(ctx, `SELECT * FROM v WHERE id = $1`, id).Scan(out...); err != nil {
					t.Fatal(err)
				}
				for i, want := range in {
					got := reflect.ValueOf(out[i]).Elem().Interface()
					if gt, ok := got.(time.Time); ok && gt.Equal(ts) {
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("column %d read back %#v, want %#v", i+1, got, want)
					}
				}
			}
		})
	}
}

func TestTheCacheIsBounded(t *testing.T) {
	db := oneConn(t)
	for k := range pg.StatementCacheSize + 10 {
		var got int
		if err := db.Get(&got, fmt.Sprintf(`SELECT $1::int + %d`, k), 1); err != nil || got != k+1 {
			t.Fatalf("statement %d = %d, %v", k, got, err)
		}
	}
	if n := preparedCount(t, db, "%"); n > pg.StatementCacheSize {
		t.Errorf("the connection holds %d prepared statements, want at most %d", n, pg.StatementCacheSize)
	}
	if n := preparedCount(t, db, "SELECT $1::int + 0"); n != 0 {
		t.Errorf("the least recently used statement is still prepared")
	}
}

// TestAStatementIsPreparedAnewAfterItsTableChanged: a statement prepared
// before a migration changed its table fails where the same text prepared
// anew succeeds. Outside a transaction the caller never sees it: the
// statement is prepared and run again at once. A transaction it aborts
// fails, marked stale, and succeeds when run again — InTx does that
// itself.
func TestAStatementIsPreparedAnewAfterItsTableChanged(t *testing.T) {
	changes := []struct {
		name, query string
		arg         any
		change      string
		code        pq.ErrorCode
	}{
		{"ResultTypeChanged", `SELECT * FROM things WHERE id = $1`, "a",
			`ALTER TABLE things ADD COLUMN extra int DEFAULT 7`,
			"0A000"}, // cached plan must not change result type
		{"ParameterTypeChanged", `SELECT count(*) FROM things WHERE status = $1`, "new",
			`CREATE TYPE st AS ENUM ('new', 'old'); ALTER TABLE things ALTER COLUMN status TYPE st USING status::st`,
			"42883"}, // operator does not exist: st = text
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			run := func(q sqlx.QueryerContext) error {
				rows, err := q.QueryxContext(context.Background(), c.query, c.arg)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
				}
				return rows.Err()
			}
			t.Run("OutsideATransactionItRunsAgainAtOnce", func(t *testing.T) {
				db := staleAfter(t, c.query, c.arg, c.change)
				for i := range 3 {
					if err := run(db); err != nil {
						t.Fatalf("run %d after the change: %v; want the statement prepared anew", i+1, err)
					}
				}
			})
			t.Run("ATransactionFailsOnceMarkedStale", func(t *testing.T) {
				db := staleAfter(t, c.query, c.arg, c.change)
				inTx := func() error {
					tx := db.MustBegin()
					defer tx.Rollback()
					return run(tx)
				}
				var pqErr *pq.Error
				if err := inTx(); !errors.As(err, &pqErr) || pqErr.Code != c.code || !pg.IsStale(err) {
					t.Fatalf("first transaction after the change: %v; want PostgreSQL's %s, marked stale", err, c.code)
				}
				for i := range 2 {
					if err := inTx(); err != nil {
						t.Fatalf("transaction %d after the failed one: %v; want the statement prepared anew", i+1, err)
					}
				}
			})
			t.Run("InTxRunsTheTransactionAgain", func(t *testing.T) {
				db := staleAfter(t, c.query, c.arg, c.change)
				runs := 0
				err := pg.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
					runs++
					return run(tx)
				})
				if err != nil || runs != 2 {
					t.Fatalf("InTx after the change: %v after %d runs; want success on the second", err, runs)
				}
			})
		})
	}
}

// TestAStaleStatementDropsThePoolsOtherCopies: one migration makes the
// same statement stale on every connection of the pool; once one
// connection found it stale, the others prepare theirs anew before they
// run it, and no second transaction fails.
func TestAStaleStatementDropsThePoolsOtherCopies(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	const q = `SELECT * FROM things WHERE id = $1`
	if _, err := db.Exec(`CREATE TABLE things (id text PRIMARY KEY); INSERT INTO things VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	first, second := conn(t, db), conn(t, db)
	inTx := func(c *sqlx.Conn) error {
		tx, err := c.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, q, "a")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
		}
		return rows.Err()
	}
	for _, c := range []*sqlx.Conn{first, second} {
		if err := inTx(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`ALTER TABLE things ADD COLUMN extra int DEFAULT 7`); err != nil {
		t.Fatal(err)
	}
	if err := inTx(first); !pg.IsStale(err) {
		t.Fatalf("the first connection's transaction: %v; want it failed on its stale statement", err)
	}
	if err := inTx(second); err != nil {
		t.Fatalf("the second connection's transaction: %v; want its copy prepared anew", err)
	}
}

// conn pins one connection of db for the test.
func conn(t *testing.T, db *sqlx.DB) *sqlx.Conn {
	t.Helper()
	c, err := db.Connx(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// staleAfter returns a one-connection database on which query, run once
// with arg, is prepared, and then change has made it stale.
func staleAfter(t *testing.T, query string, arg any, change string) *sqlx.DB {
	t.Helper()
	db := oneConn(t)
	if _, err := db.Exec(`CREATE TABLE things (id text PRIMARY KEY, status text); INSERT INTO things VALUES ('a', 'new')`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Queryx(query, arg)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if _, err := db.Exec(change); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestADataExceptionOfAnOlderStatementIsNotFinal: a statement prepared
// before a column was widened (int to bigint) refuses a value the column
// now takes. The caller sees the error, outside a transaction or in one,
// without its *pq.Error — a consumer would take class 22 for bad data and
// dead-letter a valid event — and the retry succeeds. A data exception
// from a statement prepared in the same call is the data's, and stays
// class 22.
func TestADataExceptionOfAnOlderStatementIsNotFinal(t *testing.T) {
	const q = `UPDATE acc SET n = $1 WHERE id = $2`
	widened := func(t *testing.T) *sqlx.DB {
		db := oneConn(t)
		if _, err := db.Exec(`CREATE TABLE acc (id text PRIMARY KEY, n int); INSERT INTO acc VALUES ('a', 1)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(q, 2, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`ALTER TABLE acc ALTER COLUMN n TYPE bigint`); err != nil {
			t.Fatal(err)
		}
		return db
	}
	wantN := func(t *testing.T, db *sqlx.DB) {
		t.Helper()
		var n int64
		if err := db.Get(&n, `SELECT n FROM acc WHERE id = 'a'`); err != nil || n != 5_000_000_000 {
			t.Fatalf("n = %d, %v; want 5000000000", n, err)
		}
	}
	t.Run("OutsideATransactionItFailsOnce", func(t *testing.T) {
		// Not run again at once: a data exception may come after the
		// statement did something a rollback does not undo.
		db := widened(t)
		var pqErr *pq.Error
		_, err := db.Exec(q, int64(5_000_000_000), "a")
		if err == nil || errors.As(err, &pqErr) || !pg.IsStale(err) {
			t.Fatalf("the older statement's run: %v; want its error, stale, without the *pq.Error", err)
		}
		if _, err := db.Exec(q, int64(5_000_000_000), "a"); err != nil {
			t.Fatalf("the retry: %v; want the statement prepared afresh to take the value", err)
		}
		wantN(t, db)
	})
	t.Run("ATransactionFailsWithoutThePQError", func(t *testing.T) {
		db := widened(t)
		update := func() error {
			tx := db.MustBegin()
			defer tx.Rollback()
			if _, err := tx.Exec(q, int64(5_000_000_000), "a"); err != nil {
				return err
			}
			return tx.Commit()
		}
		var pqErr *pq.Error
		err := update()
		if err == nil || errors.As(err, &pqErr) || !pg.IsStale(err) || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("the older statement's run: %v; want its out-of-range error, stale, without the *pq.Error", err)
		}
		if err := update(); err != nil {
			t.Fatalf("the retry: %v; want the statement prepared afresh to take the value", err)
		}
		wantN(t, db)
	})
	t.Run("AFreshStatementsIsTheDatas", func(t *testing.T) {
		db := widened(t)
		var pqErr *pq.Error
		_, err := db.Exec(`UPDATE acc SET n = $1::text::int WHERE id = $2`, "not a number", "a")
		if !errors.As(err, &pqErr) || pqErr.Code.Class() != "22" || pg.IsStale(err) {
			t.Errorf("a fresh statement's data exception: %v; want PostgreSQL's class 22, not stale", err)
		}
	})
}

// TestAStatementIsPreparedAgainWhenOld: however busy its connection, a
// statement is prepared again after StatementMaxAge, so that one prepared
// before a migration does not outlive it by more than that.
func TestAStatementIsPreparedAgainWhenOld(t *testing.T) {
	db := oneConn(t)
	const q = `SELECT $1::int + 1`
	name := func() string {
		t.Helper()
		var got int
		if err := db.Get(&got, q, 1); err != nil || got != 2 {
			t.Fatalf("run = %d, %v", got, err)
		}
		var names []string
		if err := db.Select(&names, `SELECT name FROM pg_prepared_statements WHERE statement = $1`, q); err != nil || len(names) != 1 {
			t.Fatalf("prepared statements of %q: %v, %v; want one", q, names, err)
		}
		return names[0]
	}
	first := name()
	pg.MoveClock(t.Cleanup, pg.StatementMaxAge-time.Second)
	if again := name(); again != first {
		t.Errorf("prepared again (%s, was %s) before StatementMaxAge", again, first)
	}
	pg.MoveClock(t.Cleanup, 2*time.Second)
	if again := name(); again == first {
		t.Errorf("still statement %s after StatementMaxAge; want it prepared again", first)
	}
}
