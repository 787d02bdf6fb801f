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
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order/internal/eventapi"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// Name is the service's name: its consumer group, de-duplication scope
// and the source of the events it emits.
const Name = "order"

// Config is the service's configuration: the runtime's; the order service
// has no settings of its own. cmd/order reads it from the environment over
// DefaultConfig.
type Config struct {
	participant.Config
}

// DefaultConfig returns the service's defaults: HTTP on :8080.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8080")}
}

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant). It returns after all three
// stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error { return participant.RunService(ctx, cfg, Spec) }

// Spec is what makes this service itself: its tables, reactions and API.
// POST /orders starts a saga by storing OrderCreated with the order; the
// reactions record how it ended.
func Spec(cfg Config) (participant.Spec, error) {
	return participant.Spec{
		Name:      Name,
		Produces:  events.TopicOrder,
		Schema:    Schema,
		Reactions: eventapi.Reactions(),
		API:       httpapi.API{Service: Name, Now: time.Now}.Routes,
	}, nil
}

// Schema is the service's own tables.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}
