package pg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/pg"
)

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
	if err := db.Get(&versions, `SELECT count(*) FROM goose_pgtest WHERE version_id > 0`); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || versions != 2 {
		t.Fatalf("after 4 concurrent migrations: %d rows in a, %d versions recorded; want 1 and 2", rows, versions)
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
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := pg.ValidateURL(tt.url)
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
