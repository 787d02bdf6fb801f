package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

func TestAddRollsBackWithTheTransaction(t *testing.T) {
	db := newDB(t)
	topic := testenv.ID("never")
	err := pg.InTx(context.Background(), db.DB, func(tx *sqlx.Tx) error {
		if err := outbox.Add(context.Background(), tx, message(t, topic, anyEvent(t))); err != nil {
			return err
		}
		return errors.New("business change failed")
	})
	if err == nil {
		t.Fatal("want the transaction's error")
	}
	var n int
	db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1`, topic)
	if n != 0 {
		t.Fatalf("outbox rows = %d after rollback, want 0", n)
	}
}

// TestPendingInsertsInOrderWithOneStatement: messages queued on a Pending
// are stored by Insert in the order queued — one key's rows keep their
// order for the relay — byte for byte (a nil key stays NULL, an empty one
// empty; values with NUL and invalid UTF-8; headers with the characters an
// array literal quotes), and an Insert with nothing queued sends nothing.
// Inserts of different sizes run one statement text, so a connection
// prepares it once.
func TestPendingInsertsInOrderWithOneStatement(t *testing.T) {
	db := testenv.DB(t)
	db.SetMaxOpenConns(1) // pg_prepared_statements below is this connection's
	ctx := context.Background()
	var p outbox.Pending
	if err := p.Insert(ctx, failingExecer{}); err != nil {
		t.Fatalf("an empty Insert sent a statement: %v", err)
	}
	msgs := []outbox.Message{
		{Topic: "t", Key: []byte("k"), Value: []byte("a"), Headers: map[string]string{"n": "0"}},
		{Topic: "t", Key: nil, Value: []byte{0, 'b', 0xff, 0}, Headers: map[string]string{"n": `1 "q" {x,y} \ NULL`}},
		{Topic: "t", Key: []byte{}, Value: []byte{}, Headers: map[string]string{"n": "2"}},
		{Topic: "t", Key: []byte{0xfe, 0}, Value: bytes.Repeat([]byte{0xc3}, 3000), Headers: map[string]string{"n": "3"}},
	}
	// Two transactions, of three messages and of one: two sizes.
	for _, batch := range [][]outbox.Message{msgs[:3], msgs[3:]} {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range batch {
			if err := p.Queue(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if p.Len() != len(batch) {
			t.Fatalf("Len = %d, want %d", p.Len(), len(batch))
		}
		if err := p.Insert(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if p.Len() != 0 {
			t.Fatalf("Len after Insert = %d, want 0", p.Len())
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var rows []struct {
		Key   []byte `db:"key"`
		Null  bool   `db:"null_key"`
		Value []byte `db:"value"`
		N     string `db:"n"`
	}
	if err := db.Select(&rows, `SELECT key, key IS NULL AS null_key, value, headers->>'n' AS n FROM outbox WHERE topic = 't' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(msgs) {
		t.Fatalf("%d rows stored, want %d", len(rows), len(msgs))
	}
	for i, r := range rows {
		m := msgs[i]
		if r.Null != (m.Key == nil) || !bytes.Equal(r.Key, m.Key) || !bytes.Equal(r.Value, m.Value) || r.N != m.Headers["n"] {
			t.Errorf("row %d = key %q (null %v) value %q n %q; want message %d as queued: key %q value %q n %q",
				i, r.Key, r.Null, r.Value, r.N, i, m.Key, m.Value, m.Headers["n"])
		}
	}
	var shapes int
	if err := db.Get(&shapes, `SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO outbox%'
		AND statement NOT LIKE '%pg_prepared_statements%'`); err != nil {
		t.Fatal(err)
	}
	if shapes != 1 {
		t.Errorf("flushes of 3 and 1 messages prepared %d statements, want 1", shapes)
	}
}

// failingExecer fails every statement.
type failingExecer struct{}

func (failingExecer) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("no statement expected")
}
