// Package order is the order service: it takes orders over HTTP, starts a
// saga for each by publishing OrderCreated, and records how the saga ended —
// COMPLETED, or CANCELLED with the reason.
//
// Run wires the service from its parts; cmd/order only reads the
// environment and calls it, so tests and the embedded mode can run the
// service in-process.
package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
	"github.com/choreo-saga/choreo/services/order/internal/saga"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Config is the service's configuration, read from the environment by
// cmd/order.
type Config struct {
	HTTPAddr     string       `envconfig:"HTTP_ADDR" default:":8080"`
	DatabaseURL  string       `envconfig:"DATABASE_URL" required:"true"`
	KafkaBrokers []string     `envconfig:"KAFKA_BROKERS" required:"true"`
	Logger       *slog.Logger `ignored:"true"`
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error {
	if err := pg.ValidateURL(c.DatabaseURL); err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	if err := broker.ValidateAddrs(c.KafkaBrokers); err != nil {
		return fmt.Errorf("KAFKA_BROKERS: %w", err)
	}
	if c.HTTPAddr == "" {
		return errors.New("HTTP_ADDR: empty")
	}
	return nil
}

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay. It returns after all three stopped, the message in hand
// finished and its offset committed.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("service", saga.Service)

	db, err := pg.Open(ctx, cfg.DatabaseURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := pg.Migrate(ctx, db, log, idem.Schema, outbox.Schema,
		pg.Schema{Name: saga.Service, FS: store.Migrations, Dir: "migrations"}); err != nil {
		return err
	}

	dlq := events.DeadLetterTopic(saga.Service)
	topics := append([]string{events.TopicOrder, dlq}, saga.Topics...)
	if err := broker.EnsureTopics(ctx, cfg.KafkaBrokers, saga.Service, topics...); err != nil {
		return err
	}
	producer, err := broker.NewSyncProducer(cfg.KafkaBrokers, saga.Service)
	if err != nil {
		return err
	}
	defer producer.Close()

	relay, err := outbox.NewRelay(outbox.RelayConfig{
		DB: db, DatabaseURL: cfg.DatabaseURL, Publisher: producer, Logger: log,
	})
	if err != nil {
		return err
	}
	group, err := consumer.New(consumer.Config{
		Brokers:    cfg.KafkaBrokers,
		GroupID:    saga.Service,
		Topics:     saga.Topics,
		Handler:    EventHandler(db, log),
		DeadLetter: outbox.DeadLetter(db, dlq, saga.Service),
		Logger:     log,
	})
	if err != nil {
		return err
	}
	api := httpapi.Routes(log, store.New(db), time.Now, map[string]web.Check{
		"database": db.PingContext,
		"kafka":    func(ctx context.Context) error { return broker.Ping(ctx, cfg.KafkaBrokers) },
	})

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(ctx) })
	g.Go(func() error { return group.Run(ctx) })
	g.Go(func() error { return web.Serve(ctx, cfg.HTTPAddr, api, log) })
	log.Info("order service started", "http", cfg.HTTPAddr, "consumes", saga.Topics)
	err = g.Wait()
	log.Info("order service stopped", "err", err)
	return err
}

// EventHandler returns the service's Kafka message handler: the idempotent
// consumer that applies the order saga's reactions. Run uses it; it is
// exported so tests can deliver messages to it directly, e.g. the same
// message from many goroutines at once.
func EventHandler(db *sqlx.DB, log *slog.Logger) consumer.Handler {
	return &idem.Handler{DB: db, Consumer: saga.Service, Routes: saga.Routes(log), Logger: log}
}
