// Package inventory is the inventory service: it keeps the units per SKU,
// reserves a paid order's items and releases them when shipping fails or
// the order is cancelled.
package inventory

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/inventory/internal/eventapi"
	"github.com/choreo-saga/choreo/services/inventory/internal/httpapi"
	"github.com/choreo-saga/choreo/services/inventory/internal/store"
)

// Name is the service's name: its consumer group, de-duplication scope
// and the source of the events it emits.
const Name = "inventory"

// Config is the service's configuration: the runtime's; the inventory
// service adds nothing of its own. cmd/inventory reads it from the
// environment over DefaultConfig.
type Config struct {
	participant.Config
}

// DefaultConfig returns the service's defaults: HTTP on :8082.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8082")}
}

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant). It returns after all three
// stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error { return participant.Run(ctx, cfg, Spec) }

// Spec is what makes this service itself: its tables, reactions and API.
// It never fails today; it returns an error like every service's Spec, so
// a setting of the service's own can be checked here later.
func Spec(cfg Config) (participant.Spec, error) {
	return participant.Spec{
		Name:      Name,
		Produces:  events.TopicInventory,
		Schema:    Schema,
		Reactions: eventapi.Reactions(),
		API:       httpapi.Routes,
		Jobs:      []participant.Job{pg.ForgetOnceKeysJob("restock_requests")},
	}, nil
}

// Schema is the service's own tables.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}
