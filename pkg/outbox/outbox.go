// Package outbox implements the transactional outbox: a service writes the
// events it wants to publish into its own database, in the same transaction
// as the state change they announce, and a Relay publishes them to Kafka
// afterwards.
//
// Publishing straight to Kafka from a request or consumer handler is a dual
// write: the database commit and the publish can each fail alone, and one
// of them is lost — a debit with no PaymentCompleted, or a PaymentCompleted
// for a debit that rolled back. With the outbox there is one write; the
// relay turns it into a publish at least once, and consumers de-duplicate
// on the event id (package idem), so the effect happens exactly once.
package outbox

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

// Migrations holds the schema of the outbox table as goose migrations. Each
// service applies them to its own database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Channel is the PostgreSQL NOTIFY channel Add signals on commit, so the
// relay publishes within milliseconds instead of waiting for its next poll.
const Channel = "outbox"

// Message is one record to publish.
type Message struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers map[string]string
}

// Execer is the part of *sqlx.Tx that Add needs. Pass the transaction that
// makes the state change; never a bare *sqlx.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Add stores m in the outbox within tx. Nothing is published until tx
// commits, and if it rolls back the message vanishes with the change it
// described.
//
// The trace context of ctx's span, if any, is stored with the row as a W3C
// traceparent header (see package tracing), so that the relay's publish,
// and the consumer's handling after it, continue the trace of the request
// or event that wrote the row, however much later they run. m.Headers is
// not modified.
func Add(ctx context.Context, tx Execer, m Message) error {
	if m.Topic == "" {
		return fmt.Errorf("outbox: message has no topic")
	}
	h := make(map[string]string, len(m.Headers)+2)
	maps.Copy(h, m.Headers)
	tracing.Inject(ctx, h)
	headers, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("outbox: headers: %w", err)
	}
	// The row and the NOTIFY in one statement, one round trip: a reaction
	// waits on every statement it sends. The notification is delivered only
	// if and when tx commits; several in one tx fold into one.
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO outbox (topic, key, value, headers)
		SELECT $1::text, $2::bytea, $3::bytea, $4::jsonb FROM pg_notify($5, '')`,
		m.Topic, m.Key, m.Value, string(headers), Channel); err != nil { // text: jsonb takes no raw bytes as a binary parameter
		return fmt.Errorf("outbox: insert into %s: %w", m.Topic, err)
	}
	return nil
}

// StorableText returns s as PostgreSQL can store it in text and jsonb —
// valid UTF-8 without NUL, other bytes replaced by U+FFFD — and whether that
// changed it. Header values and reasons headed for the outbox go through it.
func StorableText(s string) (string, bool) { return cleanText(s) }

func cleanText(s string) (string, bool) {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s, false
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), true
}

// Schema is the outbox schema for pg.Migrate.
var Schema = pg.Schema{Name: "outbox", FS: Migrations, Dir: "migrations"}
