// Package shipping is the shipping service: once an order's items are
// reserved it schedules the shipment, or fails it when the destination
// country is not served, which makes inventory release the items and
// payment refund the charge.
//
// Run wires the service from its parts; cmd/shipping only reads the
// environment and calls it, so tests and the embedded mode can run the
// service in-process.
package shipping

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	"github.com/choreo-saga/choreo/services/shipping/internal/httpapi"
	"github.com/choreo-saga/choreo/services/shipping/internal/saga"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// Config is the service's configuration, read from the environment by
// cmd/shipping.
type Config struct {
	HTTPAddr     string   `envconfig:"HTTP_ADDR" default:":8083"`
	DatabaseURL  string   `envconfig:"DATABASE_URL" required:"true"`
	KafkaBrokers []string `envconfig:"KAFKA_BROKERS" required:"true"`
	// ServedCountries is a comma-separated list of ISO 3166-1 alpha-2
	// codes; see ParseCountries. It stays a plain string so that Validate,
	// not envconfig, reports a bad entry, naming the variable.
	ServedCountries string       `envconfig:"SHIPPING_SERVED_COUNTRIES" default:"JP,US,GB,DE,FR"`
	Logger          *slog.Logger `ignored:"true"`
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
	if _, err := c.Served(); err != nil {
		return err
	}
	return nil
}

// Served returns the set of countries the service delivers to, parsed from
// ServedCountries. Errors name SHIPPING_SERVED_COUNTRIES.
func (c Config) Served() (map[string]bool, error) {
	served, err := ParseCountries(c.ServedCountries)
	if err != nil {
		return nil, fmt.Errorf("SHIPPING_SERVED_COUNTRIES: %w", err)
	}
	return served, nil
}

// ParseCountries parses a comma-separated list of country codes such as
// " jp, us " into the set {JP, US}. Each entry, trimmed, must be two ASCII
// letters, and is kept upper-cased; an empty entry is an error too, because
// a stray comma more likely hides a typo than means nothing.
func ParseCountries(list string) (map[string]bool, error) {
	served := map[string]bool{}
	for i, raw := range strings.Split(list, ",") {
		// Checked before upper-casing, so a non-ASCII letter that
		// upper-cases to ASCII (dotless ı → I) cannot slip through.
		code := strings.TrimSpace(raw)
		if len(code) != 2 || !isLetter(code[0]) || !isLetter(code[1]) {
			return nil, fmt.Errorf("entry %d %q is not a two-letter country code", i+1, raw)
		}
		served[strings.ToUpper(code)] = true
	}
	return served, nil
}

func isLetter(b byte) bool { return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' }

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay. It returns after all three stopped, the message in hand
// finished and its offset committed.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	served, err := cfg.Served()
	if err != nil {
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
	topics := append([]string{events.TopicShipping, dlq}, saga.Topics...)
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
		Handler:    EventHandler(db, log, served),
		DeadLetter: outbox.DeadLetter(db, dlq, saga.Service),
		Logger:     log,
	})
	if err != nil {
		return err
	}
	api := httpapi.Routes(log, store.New(db), map[string]web.Check{
		"database": db.PingContext,
		"kafka":    func(ctx context.Context) error { return broker.Ping(ctx, cfg.KafkaBrokers) },
	})

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(ctx) })
	g.Go(func() error { return group.Run(ctx) })
	g.Go(func() error { return web.Serve(ctx, cfg.HTTPAddr, api, log) })
	log.Info("shipping service started", "http", cfg.HTTPAddr, "consumes", saga.Topics, "served_countries", cfg.ServedCountries)
	err = g.Wait()
	log.Info("shipping service stopped", "err", err)
	return err
}

// EventHandler returns the service's Kafka message handler: the idempotent
// consumer that applies the shipping saga's reactions, delivering to the
// upper-case country codes in served (see Config.Served). Run uses it; it is
// exported so tests can deliver messages to it directly, e.g. the same
// message from many goroutines at once.
func EventHandler(db *sqlx.DB, log *slog.Logger, served map[string]bool) consumer.Handler {
	return &idem.Handler{DB: db, Consumer: saga.Service, Routes: saga.Routes(time.Now, served), Logger: log}
}
