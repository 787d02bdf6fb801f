package pg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// TestForgetOnceKeys: keys older than the lifetime go, in batches past the
// batch size, younger ones stay and still answer a retry, and a forgotten
// key applies its request again.
func TestForgetOnceKeys(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Exec(`CREATE TABLE deposits_seen (
		scope text NOT NULL, idempotency_key text NOT NULL, request_hash text NOT NULL,
		response bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (scope, idempotency_key))`); err != nil {
		t.Fatal(err)
	}
	applied := 0
	deposit := func(key string) bool {
		t.Helper()
		_, replayed, err := pg.Once(ctx, db, "deposits_seen", "alice", key, "10", func(tx *sqlx.Tx) (int, error) {
			applied++
			return applied, nil
		})
		if err != nil {
			t.Fatalf("Once(%s): %v", key, err)
		}
		return replayed
	}
	deposit("old")
	deposit("young")
	// 5,002 more old keys: more than one DELETE's batch.
	if _, err := db.Exec(`INSERT INTO deposits_seen (scope, idempotency_key, request_hash, response, created_at)
		SELECT 'bob', 'k' || i, '1', '', now() - interval '8 days' FROM generate_series(1, 5002) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE deposits_seen SET created_at = now() - interval '8 days' WHERE idempotency_key = 'old'`); err != nil {
		t.Fatal(err)
	}

	n, err := pg.ForgetOnceKeys(ctx, db, "deposits_seen", pg.OnceKeyLifetime)
	if err != nil || n != 5003 {
		t.Fatalf("ForgetOnceKeys = %d, %v; want 5003 keys forgotten", n, err)
	}
	var left []string
	if err := db.Select(&left, `SELECT idempotency_key FROM deposits_seen ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[young]" {
		t.Errorf("keys left = %v, want [young]", left)
	}
	if !deposit("young") {
		t.Error("a retry of a young key applied again; want its first answer back")
	}
	if deposit("old") {
		t.Error("a forgotten key was answered from the table; want it applied as new")
	}
	if applied != 3 {
		t.Errorf("applied %d times, want 3 (old, young, old again)", applied)
	}
}
