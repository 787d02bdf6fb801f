// Package outbox implements the transactional outbox: a service writes the
// events it publishes into its own database, in the transaction of the
// change they announce, and a Relay publishes them to Kafka.
package outbox

import (
	"context"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/tracing"
	"github.com/lib/pq"
)

// Migrations holds the schema of the outbox table as goose migrations. Each
// service applies them to its own database.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Message is one record to publish.
type Message struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers map[string]string
}

// EventMessage returns e as a Message on topic: keyed by its order id, so
// that all of one order's events share a partition and keep their order,
// with its id and type in headers, which the relay's logs and spans and
// the consumer's dead letters read without decoding the value. It fails
// only if e cannot be encoded.
func EventMessage(topic string, e events.Envelope) (Message, error) {
	value, err := e.Encode()
	if err != nil {
		return Message{}, err
	}
	return Message{
		Topic: topic,
		Key:   []byte(e.OrderID),
		Value: value,
		Headers: map[string]string{
			events.HeaderEventID:   e.ID,
			events.HeaderEventType: e.Type,
		},
	}, nil
}

// Execer is the part of *sqlx.Tx that Add needs. Pass the transaction that
// makes the state change; never a bare *sqlx.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Add stores m in the outbox within tx, and wakes the relay when tx
// commits. Nothing is published until then; if tx rolls back, the message
// vanishes with the change it described. A publish from the handler
// instead would be a dual write: the commit and the publish can each fail
// alone. The trace context of ctx's span
// goes with the row (a traceparent header), so the publish and the
// consumer continue the writer's trace. m.Headers is not modified.
func Add(ctx context.Context, tx Execer, m Message) error {
	var p Pending
	if err := p.Queue(ctx, m); err != nil {
		return err
	}
	return p.Insert(ctx, tx)
}

// Pending collects the messages of one transaction for Insert to store with
// one statement, just before the transaction commits: a reaction waits on
// every statement it sends, and a batch of events emits many. The zero
// value is ready to use.
type Pending struct {
	topics, headers []string
	keys, values    []sql.NullString // base64; NULL for a nil slice
}

// Queue queues m, with the trace context of ctx's span (see Add), for
// Insert.
func (p *Pending) Queue(ctx context.Context, m Message) error {
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
	p.topics = append(p.topics, m.Topic)
	p.keys = append(p.keys, base64Of(m.Key))
	p.values = append(p.values, base64Of(m.Value))
	p.headers = append(p.headers, string(headers))
	return nil
}

// base64Of is b as the text of a text[] element, nil as NULL: a nil key
// must stay NULL, which pq.ByteaArray cannot say.
func base64Of(b []byte) sql.NullString {
	if b == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: base64.StdEncoding.EncodeToString(b), Valid: true}
}

// Len is how many messages wait for Insert.
func (p *Pending) Len() int { return len(p.topics) }

// Insert stores the queued messages in the outbox within tx, in the order
// they were queued, wakes the relay (notify.go), and empties p. With
// nothing queued it sends nothing. The statement's text is the same for any
// number of messages (arrays, not n VALUES rows), so a connection prepares
// it once (see pg.StatementCacheSize).
func (p *Pending) Insert(ctx context.Context, tx Execer) error {
	n := p.Len()
	if n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, insertAndWake,
		pq.StringArray(p.topics), pq.Array(p.keys), pq.Array(p.values), pq.StringArray(p.headers)); err != nil {
		return fmt.Errorf("outbox: insert %d rows: %w", n, err)
	}
	p.topics, p.keys, p.values, p.headers = p.topics[:0], p.keys[:0], p.values[:0], p.headers[:0]
	return nil
}

// insertAndWake inserts the rows, their serial ids in the order queued (the
// relay publishes one key's rows in id order), and in the same statement
// NOTIFYs the relay on Channel, unless its leader is awake and comes back
// for them on its own: a notifying commit takes a cluster-wide lock
// (withWakeUp, notify.go).
var insertAndWake = withWakeUp(`
	INSERT INTO outbox (topic, key, value, headers)
	SELECT m.topic, decode(m.key, 'base64'), decode(m.value, 'base64'), m.headers::jsonb
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS m(topic, key, value, headers, ord)
	ORDER BY m.ord`)

// Schema is the outbox schema for pg.Migrate.
var Schema = pg.Schema{Name: "outbox", FS: Migrations, Dir: "migrations"}
