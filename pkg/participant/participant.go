// Package participant runs one service of the saga. Every participant is
// built the same way, and this is the one place that says how:
//
//  1. open its own database and apply the shared schemas (processed_events,
//     outbox) and its own;
//  2. create the topics it produces, dead-letters to and consumes;
//  3. start the outbox relay, which alone publishes to Kafka;
//  4. start the consumer group, whose handler is the idempotent consumer
//     (idem.Handler) running the participant's reactions;
//  5. serve its HTTP API with health and readiness endpoints;
//
// and stop all three together when the context ends, finishing the message
// in hand and committing its offset.
//
// A service supplies only what makes it itself: a Spec with its name,
// topics, tables, reactions and API.
package participant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
)

// Config is the runtime configuration every participant shares. Services
// read it from the environment (HTTP_ADDR, DATABASE_URL, KAFKA_BROKERS).
type Config struct {
	HTTPAddr     string
	DatabaseURL  string
	KafkaBrokers []string
	Logger       *slog.Logger
}

// Validate reports the first bad setting, naming its environment variable.
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

// Spec is what distinguishes one participant from another.
type Spec struct {
	// Name is the consumer group, the de-duplication scope, the source of
	// the events it emits, and the prefix of its dead-letter topic.
	Name string
	// Produces is the topic its reactions and API emit to.
	Produces string
	// Consumes are the topics its reactions listen to.
	Consumes []string
	// Schema holds its own tables.
	Schema pg.Schema
	// Routes are its reactions, by event type.
	Routes map[string]idem.Route
	// API builds its HTTP handler; checks are the readiness probes to
	// serve on /readyz.
	API func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler
}

// Handler returns the participant's Kafka message handler: the idempotent
// consumer running its Routes. Run consumes with it; tests can call it
// directly, e.g. from many goroutines with the same message.
func (s Spec) Handler(db *sqlx.DB, log *slog.Logger) consumer.Handler {
	return &idem.Handler{DB: db, Consumer: s.Name, Routes: s.Routes, Logger: log}
}

// Run runs the participant until ctx ends. It returns the first component's
// error, or nil after a clean shutdown.
func Run(ctx context.Context, cfg Config, spec Spec) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("service", spec.Name)

	db, err := pg.Open(ctx, cfg.DatabaseURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := pg.Migrate(ctx, db, log, idem.Schema, outbox.Schema, spec.Schema); err != nil {
		return err
	}

	dlq := events.DeadLetterTopic(spec.Name)
	topics := append([]string{spec.Produces, dlq}, spec.Consumes...)
	if err := broker.EnsureTopics(ctx, cfg.KafkaBrokers, spec.Name, topics...); err != nil {
		return err
	}
	producer, err := broker.NewSyncProducer(cfg.KafkaBrokers, spec.Name)
	if err != nil {
		return err
	}
	defer producer.Close()

	relay, err := outbox.NewRelay(outbox.RelayConfig{
		Name: spec.Name, DB: db, DatabaseURL: cfg.DatabaseURL, Publisher: producer, Logger: log,
	})
	if err != nil {
		return err
	}
	group, err := consumer.New(consumer.Config{
		Brokers:    cfg.KafkaBrokers,
		GroupID:    spec.Name,
		Topics:     spec.Consumes,
		Handler:    spec.Handler(db, log),
		DeadLetter: outbox.DeadLetter(db, dlq, spec.Name),
		Logger:     log,
	})
	if err != nil {
		return err
	}
	api := spec.API(log, db, map[string]web.Check{
		"database": db.PingContext,
		"kafka":    broker.NewProbe(cfg.KafkaBrokers, time.Second).Check,
	})

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(ctx) })
	g.Go(func() error { return group.Run(ctx) })
	g.Go(func() error { return web.Serve(ctx, cfg.HTTPAddr, api, log) })
	log.Info("service started", "http", cfg.HTTPAddr, "produces", spec.Produces, "consumes", spec.Consumes)
	err = g.Wait()
	log.Info("service stopped", "err", err)
	return err
}
