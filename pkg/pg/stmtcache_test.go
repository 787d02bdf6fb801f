package pg_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
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

// TestAStatementIsPreparedAnewAfterItsTableChanged: a prepared statement
// keeps the result and parameter types it was prepared with. After a
// migration changed them under a running instance, PostgreSQL refuses the
// statement; that one call fails, as a transient error its caller retries,
// and the next is prepared anew — not a statement that fails on every call
// until the process restarts.
func TestAStatementIsPreparedAnewAfterItsTableChanged(t *testing.T) {
	t.Run("ResultTypeChanged", func(t *testing.T) {
		wantPreparedAnew(t, `SELECT * FROM things WHERE id = $1`, "a",
			`ALTER TABLE things ADD COLUMN extra int DEFAULT 7`,
			"0A000") // cached plan must not change result type
	})
	t.Run("ParameterTypeChanged", func(t *testing.T) {
		wantPreparedAnew(t, `SELECT count(*) FROM things WHERE status = $1`, "new",
			`CREATE TYPE st AS ENUM ('new', 'old'); ALTER TABLE things ALTER COLUMN status TYPE st USING status::st`,
			"42883") // operator does not exist: st = text
	})
}

// wantPreparedAnew runs query with arg, then change, then wants query to
// fail once with PostgreSQL's code and succeed on the next two runs.
func wantPreparedAnew(t *testing.T, query string, arg any, change string, code pq.ErrorCode) {
	t.Helper()
	db := oneConn(t)
	if _, err := db.Exec(`CREATE TABLE things (id text PRIMARY KEY, status text); INSERT INTO things VALUES ('a', 'new')`); err != nil {
		t.Fatal(err)
	}
	run := func() error {
		rows, err := db.Queryx(query, arg)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
		}
		return rows.Err()
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(change); err != nil {
		t.Fatal(err)
	}
	var pqErr *pq.Error
	if err := run(); !errors.As(err, &pqErr) || pqErr.Code != code {
		t.Fatalf("first run after the change: %v; want PostgreSQL's %s", err, code)
	}
	for i := range 2 {
		if err := run(); err != nil {
			t.Fatalf("run %d after the failed one: %v; want the statement prepared anew", i+1, err)
		}
	}
}
