package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// debeziumContender is OUTBOX_RELAY=debezium as a service runs it:
// outbox.Add in the transaction, Debezium's PostgreSQL connector on the
// Kafka Connect worker at KAFKA_CONNECT_URL (scripts/infra.sh connect-up)
// reading the WAL, and the service's own side (outbox.Start: the trigger,
// the hand-over, the sweep). Its connector produces as the bench's Kafka
// user, which may write the bench's topics (e.topics, the trigger's). The connector is paused while
// the backlog is committed and resumed by Run, so the drain times Debezium
// alone, as the other contenders start after their backlog.
type debeziumContender struct {
	e       *env
	base    string
	client  *http.Client
	user    string
	secrets string
	sweep   func(context.Context) error
}

func (c *debeziumContender) Name() string { return "debezium" }

func (c *debeziumContender) Prepare(ctx context.Context, e *env) error {
	c.e, c.base, c.user = e, os.Getenv("KAFKA_CONNECT_URL"), e.kafka.Username
	c.secrets = os.Getenv("KAFKA_CONNECT_SECRETS_DIR")
	if c.base == "" || c.secrets == "" || c.user == "" {
		return errors.New(`needs a Kafka Connect worker and a Kafka user: KAFKA_CONNECT_URL, KAFKA_CONNECT_SECRETS_DIR, KAFKA_USERNAME (eval "$(bash scripts/infra.sh up)"; bash scripts/infra.sh connect-up)`)
	}
	client, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), os.Getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		return err
	}
	c.client = client
	password, err := e.kafka.Secret()
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	// A slot of an earlier run would hold this fresh database's name but
	// not its WAL position: remove it first.
	if err := connect.Stop(ctx, client, c.base, c.user, e.url, c.secrets); err != nil {
		return fmt.Errorf("remove an earlier connector: %w", err)
	}
	// Its heartbeats need a topic of their own: choreoctl kafka-acls makes
	// them for the services only, and the brokers create none on a write.
	if err := broker.EnsureTopicsWith(ctx, e.kafka, "bench", broker.DefaultTopicSettings(), outbox.HeartbeatTopic(c.user)); err != nil {
		return err
	}
	if _, err := connect.Start(ctx, client, c.base, c.user, e.url, connect.Secrets{Dir: c.secrets, KafkaPassword: password}, log); err != nil {
		return err
	}
	run, _, err := outbox.Start(ctx, outbox.StartConfig{Relay: outbox.RelayDebezium, Name: c.user, DB: e.db, Topics: e.topics, Logger: log})
	if err != nil {
		return err
	}
	c.sweep = run
	return connect.Pause(ctx, client, c.base, "choreo-"+c.user)
}

func (c *debeziumContender) Insert(ctx context.Context, topic string, from, to int) error {
	return insertEach(ctx, c.e.db, from, to, func(tx *sqlx.Tx, i int) error {
		return outbox.Add(ctx, tx, outbox.Message{Topic: topic, Key: key(i), Value: []byte(strconv.Itoa(i))})
	})
}

func (c *debeziumContender) Run(ctx context.Context) error {
	if err := connect.Resume(ctx, c.client, c.base, "choreo-"+c.user); err != nil {
		return err
	}
	return c.sweep(ctx)
}

// Close removes the connector and its slot, which would hold WAL for ever.
func (c *debeziumContender) Close() error {
	if c.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return connect.Stop(ctx, c.client, c.base, c.user, c.e.url, c.secrets)
}
