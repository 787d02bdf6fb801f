// Package inventory is the inventory service: it keeps the units per SKU,
// reserves a paid order's items and releases them when shipping fails.
//
// Run wires the service from its parts; cmd/inventory only reads the
// environment and calls it, so tests and the embedded mode can run the
// service in-process.
package inventory

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory/internal/httpapi"
	"github.com/choreo-saga/choreo/services/inventory/internal/saga"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// Config is the service's configuration, read from the environment by
// cmd/inventory.
type Config struct {
	HTTPAddr     string       `envconfig:"HTTP_ADDR" default:":8082"`
	DatabaseURL  string       `envconfig:"DATABASE_URL" required:"true"`
	KafkaBrokers []string     `envconfig:"KAFKA_BROKERS" required:"true"`
	Logger       *slog.Logger `ignored:"true"`
}

// runtime is the part of the configuration every participant shares.
func (c Config) runtime() participant.Config {
	return participant.Config{HTTPAddr: c.HTTPAddr, DatabaseURL: c.DatabaseURL, KafkaBrokers: c.KafkaBrokers, Logger: c.Logger}
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error { return c.runtime().Validate() }

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant for the steps). It returns after
// all three stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error {
	return participant.Run(ctx, cfg.runtime(), spec())
}

// spec is what makes this service itself: its topics, tables, reactions
// and API.
func spec() participant.Spec {
	return participant.Spec{
		Name:     saga.Service,
		Produces: events.TopicInventory,
		Consumes: saga.Topics,
		Schema:   pg.Schema{Name: saga.Service, FS: store.Migrations, Dir: "migrations"},
		Routes:   saga.Routes(time.Now),
		API: func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler {
			return httpapi.Routes(log, store.New(db), checks)
		},
	}
}

// EventHandler returns the Kafka message handler Run consumes with: the
// idempotent consumer applying the inventory service's reactions. It is
// exported so tests can deliver messages to the real handler directly, e.g.
// the same message from many goroutines at once.
func EventHandler(db *sqlx.DB, log *slog.Logger) consumer.Handler {
	return spec().Handler(db, log)
}
