package pg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/pg"
)

func TestGet(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Exec(`CREATE TABLE things (id text PRIMARY KEY, n int); INSERT INTO things VALUES ('a', 1)`); err != nil {
		t.Fatal(err)
	}
	type thing struct {
		ID string `db:"id"`
		N  int    `db:"n"`
	}
	got, err := pg.Get[thing](ctx, db, "thing a", `SELECT id, n FROM things WHERE id = $1`, "a")
	if err != nil || got != (thing{"a", 1}) {
		t.Errorf("Get(a) = %+v, %v; want {a 1}", got, err)
	}
	_, err = pg.Get[thing](ctx, db, "thing b", `SELECT id, n FROM things WHERE id = $1`, "b")
	var fe *fault.Error
	if !errors.Is(err, fault.NotFound) || !errors.As(err, &fe) || fe.Detail() != "thing b" {
		t.Errorf("Get(b) error = %v; want fault.NotFound with detail %q", err, "thing b")
	}
	_, err = pg.Get[thing](ctx, db, "thing a", `SELECT id, n, missing FROM things WHERE id = $1`, "a")
	if err == nil || errors.Is(err, fault.NotFound) || !strings.HasPrefix(err.Error(), "get thing a: ") {
		t.Errorf("Get with a failing query: error = %v; want \"get thing a: …\", not NotFound", err)
	}
}

// TestMigrateConcurrently starts "four instances" of a service at once
// against one fresh schema: the advisory lock lets one apply the migrations
// and the others find nothing left to do.
func TestMigrateConcurrently(t *testing.T) {
	db := testenv.DB(t) // a fresh schema; idem and outbox already applied
	schema := pg.Schema{Name: "pgtest", Dir: "m", FS: fstest.MapFS{
		"m/00001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE a (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE a;\n")},
		"m/00002_b.sql": {Data: []byte("-- +goose Up\nCREATE TABLE b (id int PRIMARY KEY);\nINSERT INTO a VALUES (1);\n-- +goose Down\nDROP TABLE b;\n")},
	}}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pg.Migrate(context.Background(), db, testenv.Logger(t), schema)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	var rows, versions int
	if err := db.Get(&rows, `SELECT count(*) FROM a`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&versions, `SELECT count(*) FROM migrations_pgtest WHERE version_id > 0`); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || versions != 2 {
		t.Fatalf("after 4 concurrent migrations: %d rows in a, %d versions recorded; want 1 and 2", rows, versions)
	}
}

// TestMigrateRefusesLegacyDatabase: a database migrated before the
// migrations were folded into one baseline (versions in goose_<name>) is
// refused with a message that says to drop it, rather than half-migrated.
func TestMigrateRefusesLegacyDatabase(t *testing.T) {
	db := testenv.DB(t)
	if _, err := db.Exec(`CREATE TABLE goose_pglegacy (id serial PRIMARY KEY, version_id bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	schema := pg.Schema{Name: "pglegacy", Dir: "m", FS: fstest.MapFS{
		"m/00001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE a (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE a;\n")},
	}}
	err := pg.Migrate(context.Background(), db, testenv.Logger(t), schema)
	if err == nil || !strings.Contains(err.Error(), "goose_pglegacy") || !strings.Contains(err.Error(), "drop the database") {
		t.Fatalf("Migrate over a legacy version table: error = %v; want one naming goose_pglegacy and saying to drop the database", err)
	}
	var applied bool
	if err := db.Get(&applied, `SELECT to_regclass('a') IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if applied {
		t.Error("the baseline was applied over the legacy database")
	}
}

func TestValidateURL(t *testing.T) {
	tests := []struct {
		url, wantErr string
	}{
		{"postgres://u@localhost:5432/db?sslmode=disable", ""},
		{"postgresql://localhost/db", ""},
		{"mysql://localhost/db", "scheme"},
		{"postgres:///db", "no host"},
		{"postgres://localhost", "no database"},
		{"postgres://localhost/", "no database"},
		{"::not a url", "not a URL"},
		// A malformed URL's error is logged at start: it must not hold
		// the password, even where the password is what broke the URL.
		{"postgres://u:s3cret@localhost:5432x/db", "not a URL"},
		{"postgres://u:s3/cret@localhost/db", "not a URL"},
		{"postgres://u:s3cret\x7f@localhost/db", "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := pg.ValidateURL(tt.url)
			if err != nil && strings.Contains(err.Error(), "s3") {
				t.Fatalf("ValidateURL = %v: the error shows the password", err)
			}
			if _, err := pg.WithSessionDefaults(tt.url); err != nil && strings.Contains(err.Error(), "s3") {
				t.Fatalf("WithSessionDefaults = %v: the error shows the password", err)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateURL: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateURL = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestSessionsAreBounded: every session Open makes runs under
// SessionDefaults, and a transaction left idle — its process frozen — is
// ended by the server, releasing its locks.
func TestSessionsAreBounded(t *testing.T) {
	ctx := context.Background()
	t.Run("DefaultsApply", func(t *testing.T) {
		db, err := pg.Open(ctx, testenv.DatabaseURL(t), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for name, want := range map[string]string{
			"idle_in_transaction_session_timeout": "15s", "statement_timeout": "0",
			"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3",
		} {
			var got string
			if err := db.GetContext(ctx, &got, "SELECT current_setting($1)", name); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
	})
	t.Run("URLOverridesDefaults", func(t *testing.T) {
		u, err := pg.WithSessionDefaults("postgres://h/db?statement_timeout=5&sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(u, "statement_timeout=5&") && !strings.HasSuffix(u, "statement_timeout=5") {
			t.Errorf("URL %s lost statement_timeout=5", u)
		}
	})
	t.Run("IdleTransactionIsEndedAndItsLocksReleased", func(t *testing.T) {
		db := testenv.DB(t)
		if _, err := db.Exec(`CREATE TABLE held (id int PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		// As a frozen handler would: take a row lock, then do nothing.
		if _, err := tx.Exec(`SET LOCAL idle_in_transaction_session_timeout = 300`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO held VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		// Another session can insert the same key once the server ended
		// the idle transaction; before, it would wait on the row lock.
		testenv.Eventually(t, 10*time.Second, "the idle transaction's lock is released", func() bool {
			_, err := db.Exec(`SET lock_timeout = 100; INSERT INTO held VALUES (1)`)
			return err == nil
		})
		if _, err := tx.Exec(`SELECT 1`); err == nil {
			t.Error("the idle transaction is still usable, want it ended by the server")
		}
	})
}

// TestMigrateRefusesAnEditedMigration: goose records versions only, so a
// baseline edited after a database applied it would leave that database
// of the old shape in silence. Migrate refuses it at start instead, and a
// database migrated before checksums were recorded too; a migration added
// later still applies.
func TestMigrateRefusesAnEditedMigration(t *testing.T) {
	ctx := context.Background()
	log := testenv.Logger(t)
	const v1 = "-- +goose Up\nCREATE TABLE rows (id int PRIMARY KEY);\n-- +goose Down\nDROP TABLE rows;\n"
	const v1Edited = "-- +goose Up\nCREATE TABLE rows (id int PRIMARY KEY, refused_at timestamptz);\n-- +goose Down\nDROP TABLE rows;\n"
	const v2 = "-- +goose Up\nCREATE INDEX rows_id ON rows (id);\n-- +goose Down\nDROP INDEX rows_id;\n"
	schema := func(files map[string]string) pg.Schema {
		m := fstest.MapFS{}
		for name, data := range files {
			m["m/"+name] = &fstest.MapFile{Data: []byte(data)}
		}
		return pg.Schema{Name: "pgsums", Dir: "m", FS: m}
	}
	tests := []struct {
		name    string
		prepare func(db *sqlx.DB)
		files   map[string]string
		wantErr string // "" = migrates
	}{
		{"SameFilesAgain", nil, map[string]string{"00001_a.sql": v1}, ""},
		{"AMigrationAdded", nil, map[string]string{"00001_a.sql": v1, "00002_b.sql": v2}, ""},
		{"BaselineEdited", nil, map[string]string{"00001_a.sql": v1Edited}, "00001_a.sql was edited after this database applied it"},
		{"AppliedMigrationGone", nil, map[string]string{"00002_b.sql": v2}, "applied version 1, which this build does not have"},
		{"MigratedBeforeChecksums", func(db *sqlx.DB) {
			if _, err := db.Exec(`DELETE FROM migration_sums WHERE schema = 'pgsums'`); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"00001_a.sql": v1}, "before migrations were checksummed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := testenv.DB(t)
			if err := pg.Migrate(ctx, db, log, schema(map[string]string{"00001_a.sql": v1})); err != nil {
				t.Fatalf("first Migrate: %v", err)
			}
			if tt.prepare != nil {
				tt.prepare(db)
			}
			err := pg.Migrate(ctx, db, log, schema(tt.files))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Migrate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "drop the database") {
				t.Fatalf("Migrate = %v; want an error saying %q and to drop the database", err, tt.wantErr)
			}
		})
	}
}
