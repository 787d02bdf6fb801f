// Package consumer is an idempotent Kafka consumer with a transactional
// outbox on plain sarama and database/sql: the file to read top to bottom
// and copy.
package consumer

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	_ "github.com/lib/pq" // the PostgreSQL driver, registered as "postgres"
)

// PaymentRequested asks to debit an account. The event id travels in the
// JSON value rather than a header, so it is part of the event itself and
// survives any tool that copies values but drops headers.
type PaymentRequested struct {
	EventID string `json:"event_id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// PaymentCompleted is the event emitted, through the outbox, once the debit
// is committed.
type PaymentCompleted struct {
	EventID string `json:"event_id"`
	Cause   string `json:"cause"` // the PaymentRequested it answers
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// CompletedTopic is where the outbox rows written by Handle are published.
const CompletedTopic = "example.payments.completed"

// Consumer is the sarama consumer group handler.
type Consumer struct{ DB *sql.DB }

// Setup and Cleanup are part of sarama.ConsumerGroupHandler; this consumer
// needs neither.
func (Consumer) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (Consumer) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim handles a partition's messages in order and marks each one
// only after Handle has committed: a crash in between redelivers the
// message, and Handle skips it as a duplicate.
func (c Consumer) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		// Retry in place, so the partition's order holds. A real consumer
		// also sends a message that can never apply to a dead-letter topic.
		for {
			err := Handle(sess.Context(), c.DB, msg)
			if err == nil {
				break
			}
			log.Printf("%s/%d@%d: %v", msg.Topic, msg.Partition, msg.Offset, err)
			select {
			case <-sess.Context().Done():
				return nil // not marked: the partition's next owner redelivers it
			case <-time.After(time.Second):
			}
		}
		sess.MarkMessage(msg, "")
	}
	return nil
}

// Handle applies one PaymentRequested exactly once: the processed_events
// row, the debit and the outbox row commit together or not at all. A
// duplicate commits nothing and returns nil, so that it is acknowledged.
func Handle(ctx context.Context, db *sql.DB, msg *sarama.ConsumerMessage) error {
	var in PaymentRequested
	if err := json.Unmarshal(msg.Value, &in); err != nil {
		return fmt.Errorf("decode PaymentRequested: %w", err)
	}
	if in.EventID == "" { // else the first such event would hide every later one
		return errors.New("PaymentRequested without event_id")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit

	// 1. The unique key decides, never a SELECT first: of two deliveries at
	// once, the second waits for the first to commit, then inserts nothing.
	res, err := tx.ExecContext(ctx,
		`INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING`, in.EventID)
	if err != nil {
		return fmt.Errorf("mark %s: %w", in.EventID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // a duplicate: acknowledged, and the deferred Rollback writes nothing
	}

	// 2. The business effect.
	res, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, in.Account, in.Amount)
	if err != nil {
		return fmt.Errorf("debit %s: %w", in.Account, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("debit %s: no such account", in.Account)
	}

	// 3. The event it emits, in the same transaction: it is published if and
	// only if the debit commits. Its id is new; the relay keeps it on resends.
	out, err := json.Marshal(PaymentCompleted{EventID: uuid.NewString(), Cause: in.EventID, Account: in.Account, Amount: in.Amount})
	if err != nil {
		return fmt.Errorf("encode PaymentCompleted: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO outbox (topic, key, value) VALUES ($1, $2, $3)`, CompletedTopic, in.Account, out); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", in.EventID, err)
	}
	return nil
}

// Kafka is where the example connects, and as whom: the brokers
// authenticate every client (SASL/SCRAM, see scram.go) and let each use
// only its own topics and group.
type Kafka struct {
	Brokers        []string
	User, Password string
}

// Config is the sarama configuration of the consumer and of the relay's
// producer.
func (k Kafka) Config() *sarama.Config {
	c := sarama.NewConfig()
	authenticate(c, k.User, k.Password)
	c.Version = sarama.V3_6_0_0
	c.Consumer.Offsets.Initial = sarama.OffsetOldest // a new group misses nothing
	// The producer writes each message once and in order, even on retries
	// (idempotent, one request in flight), and only counts it sent when
	// every in-sync replica has it (acks=all).
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true // a SyncProducer needs it
	return c
}

// Run consumes topic as group with handler (a Consumer) until ctx ends.
func Run(ctx context.Context, k Kafka, group, topic string, handler sarama.ConsumerGroupHandler) error {
	cg, err := sarama.NewConsumerGroup(k.Brokers, group, k.Config())
	if err != nil {
		return fmt.Errorf("consumer group %s: %w", group, err)
	}
	defer cg.Close() // commits the offsets marked so far
	for ctx.Err() == nil {
		// Consume returns at every rebalance; the loop joins the next one.
		if err := cg.Consume(ctx, []string{topic}, handler); err != nil {
			return fmt.Errorf("consume %s: %w", topic, err)
		}
	}
	return nil
}

// Schema creates processed_events, accounts and outbox.
//
//go:embed schema.sql
var Schema string

// Migrate applies Schema to db.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
