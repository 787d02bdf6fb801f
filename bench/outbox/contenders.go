package main

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// key spreads rows over partitions as order ids would.
func key(i int) []byte { return []byte("order-" + strconv.Itoa(i%97)) }

// insertEach commits rows [from, to) in one transaction, insert writing
// row i.
func insertEach(ctx context.Context, db *sqlx.DB, from, to int, insert func(tx *sqlx.Tx, i int) error) error {
	return pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
		for i := from; i < to; i++ {
			if err := insert(tx, i); err != nil {
				return err
			}
		}
		return nil
	})
}

// relayContender is choreo's outbox: outbox.Add in the transaction,
// outbox.Relay publishing.
type relayContender struct{ e *env }

func (c *relayContender) Name() string { return "relay" }

func (c *relayContender) Prepare(ctx context.Context, e *env) error {
	c.e = e
	return pg.Migrate(ctx, e.db, slog.New(slog.DiscardHandler), outbox.Schema)
}

func (c *relayContender) Insert(ctx context.Context, topic string, from, to int) error {
	return insertEach(ctx, c.e.db, from, to, func(tx *sqlx.Tx, i int) error {
		return outbox.Add(ctx, tx, outbox.Message{Topic: topic, Key: key(i), Value: []byte(strconv.Itoa(i))})
	})
}

func (c *relayContender) Run(ctx context.Context) error {
	p, err := c.e.kafka.NewSyncProducer("bench-relay")
	if err != nil {
		return err
	}
	defer p.Close()
	r, err := outbox.NewRelay(outbox.RelayConfig{Name: "bench", DB: c.e.db, DatabaseURL: c.e.url, Publisher: p, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Run(ctx)
}

// naiveContender is the poller a first version often is: every second,
// read the unsent rows, then for each one send it synchronously and mark
// it sent — one round trip to Kafka and one to PostgreSQL per row.
type naiveContender struct{ e *env }

func (c *naiveContender) Name() string { return "naive" }

func (c *naiveContender) Prepare(ctx context.Context, e *env) error {
	c.e = e
	_, err := e.db.ExecContext(ctx, `CREATE TABLE naive_outbox (
		id bigserial PRIMARY KEY, topic text NOT NULL, key bytea, value bytea NOT NULL, sent_at timestamptz)`)
	return err
}

func (c *naiveContender) Insert(ctx context.Context, topic string, from, to int) error {
	return insertEach(ctx, c.e.db, from, to, func(tx *sqlx.Tx, i int) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO naive_outbox (topic, key, value) VALUES ($1, $2, $3)`,
			topic, key(i), []byte(strconv.Itoa(i)))
		return err
	})
}

func (c *naiveContender) Run(ctx context.Context) error {
	p, err := c.e.kafka.NewSyncProducer("bench-naive")
	if err != nil {
		return err
	}
	defer p.Close()
	type row struct {
		ID         int64
		Topic      string
		Key, Value []byte
	}
	for {
		var rows []row
		if err := c.e.db.SelectContext(ctx, &rows, `SELECT id, topic, key, value FROM naive_outbox WHERE sent_at IS NULL ORDER BY id LIMIT 1000`); err != nil {
			return err
		}
		sent := 0
		for _, r := range rows {
			// A failed send (a new topic's metadata not there yet) leaves
			// the row for the next poll, as such a poller would.
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: r.Topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}); err != nil {
				break
			}
			if _, err := c.e.db.ExecContext(ctx, `UPDATE naive_outbox SET sent_at = now() WHERE id = $1`, r.ID); err != nil {
				return err
			}
			sent++
		}
		if sent == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
}

// watermillContender is Watermill's outbox: the SQL publisher, wrapped by
// the forwarder's envelope, writes in the transaction; the Forwarder reads
// the SQL topic and publishes to Kafka. Defaults throughout (poll 1s),
// as a user following its documentation gets them.
type watermillContender struct {
	e      *env
	logger watermill.LoggerAdapter
}

const forwarderTopic = "outbox_forwarder"

func (c *watermillContender) Name() string { return "watermill" }

func (c *watermillContender) Prepare(ctx context.Context, e *env) error {
	c.e, c.logger = e, watermill.NopLogger{}
	sub, err := c.subscriber()
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(forwarderTopic)
}

func (c *watermillContender) subscriber() (*wsql.Subscriber, error) {
	return wsql.NewSubscriber(wsql.BeginnerFromStdSQL(c.e.db.DB), wsql.SubscriberConfig{
		ConsumerGroup:    "bench",
		SchemaAdapter:    wsql.DefaultPostgreSQLSchema{},
		OffsetsAdapter:   wsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
	}, c.logger)
}

func (c *watermillContender) Insert(ctx context.Context, topic string, from, to int) error {
	tx, err := c.e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := c.publish(tx, topic, from, to); err != nil {
		return err
	}
	return tx.Commit()
}

// publish writes rows [from, to) through the forwarder's publisher on tx.
func (c *watermillContender) publish(tx *stdsql.Tx, topic string, from, to int) error {
	sqlPub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultPostgreSQLSchema{}}, c.logger)
	if err != nil {
		return err
	}
	pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: forwarderTopic})
	msgs := make([]*message.Message, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, message.NewMessage(watermill.NewUUID(), []byte(strconv.Itoa(i))))
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		return fmt.Errorf("watermill publish: %w", err)
	}
	return nil
}

func (c *watermillContender) Run(ctx context.Context) error {
	sub, err := c.subscriber()
	if err != nil {
		return err
	}
	// Watermill's defaults, logged in as the others are.
	sc := kafka.DefaultSaramaSyncPublisherConfig()
	auth, err := c.e.kafka.Config("bench-watermill")
	if err != nil {
		return err
	}
	sc.Net.SASL, sc.Net.TLS = auth.Net.SASL, auth.Net.TLS
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.e.kafka.Brokers, Marshaler: kafka.DefaultMarshaler{}, OverwriteSaramaConfig: sc}, c.logger)
	if err != nil {
		return err
	}
	f, err := forwarder.NewForwarder(sub, pub, c.logger, forwarder.Config{ForwarderTopic: forwarderTopic})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- f.Run(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		f.Close()
		<-errc
		return ctx.Err()
	}
}
