// Package order is the order service: it takes orders over HTTP, starts a
// saga for each, cancels it on request or past its deadline, and records
// how the saga ended.
package order

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order/internal/deadline"
	"github.com/choreo-saga/choreo/services/order/internal/eventapi"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Name is the service's name: its consumer group, de-duplication scope
// and the source of the events it emits.
const Name = "order"

// Config is the service's configuration: the runtime's, and the saga
// deadline. cmd/order reads it from the environment over DefaultConfig.
type Config struct {
	participant.Config
	// Deadline is how long an order may stay PENDING: older ones are
	// cancelled with reason timeout, as a customer's cancel would.
	Deadline time.Duration `envconfig:"ORDER_DEADLINE"`
	// DeadlineSweep is how often the service looks for such orders.
	DeadlineSweep time.Duration `envconfig:"ORDER_DEADLINE_SWEEP"`
}

// DefaultConfig returns the service's defaults: HTTP on :8080, a deadline
// of 5 minutes looked for every 5 seconds.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8080"), Deadline: 5 * time.Minute, DeadlineSweep: 5 * time.Second}
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	return c.validateOwn()
}

// validateOwn checks the order service's own settings.
func (c Config) validateOwn() error {
	if c.Deadline <= 0 {
		return fmt.Errorf("ORDER_DEADLINE: must be positive, got %s", c.Deadline)
	}
	if c.DeadlineSweep <= 0 {
		return fmt.Errorf("ORDER_DEADLINE_SWEEP: must be positive, got %s", c.DeadlineSweep)
	}
	return nil
}

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant). It returns after all three
// stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error { return participant.Run(ctx, cfg, Spec) }

// Spec is what makes this service itself: its tables, reactions, API and
// deadline sweep. POST /orders starts a saga by storing OrderCreated with
// the order; POST /orders/{id}/cancel and the sweep cancel it by storing
// OrderCancelRequested; the reactions record how it ended.
func Spec(cfg Config) (participant.Spec, error) {
	if err := cfg.validateOwn(); err != nil {
		return participant.Spec{}, err
	}
	return participant.Spec{
		Name:      Name,
		Produces:  events.TopicOrder,
		Schema:    Schema,
		Reactions: eventapi.Reactions(),
		API:       httpapi.API{Service: Name, Now: time.Now}.Routes,
		Jobs: []participant.Job{func(ctx context.Context, db *sqlx.DB, log *slog.Logger) error {
			return deadline.Sweeper{
				Store: store.New(db), Deadline: cfg.Deadline, Every: cfg.DeadlineSweep,
				Source: Name, Log: log,
			}.Run(ctx)
		}},
	}, nil
}

// Schema is the service's own tables.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}
