// Package payment is the payment service: it keeps customers' balances,
// charges an order when it is created and refunds it when a later step of
// the saga fails or the order is cancelled.
package payment

import (
	"context"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment/internal/eventapi"
	"github.com/choreo-saga/choreo/services/payment/internal/httpapi"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// Name is the service's name: its consumer group, de-duplication scope
// and the source of the events it emits.
const Name = "payment"

// Config is the service's configuration: the runtime's, nothing of its
// own. cmd/payment reads it from the environment over DefaultConfig.
type Config struct {
	participant.Config
}

// DefaultConfig returns the service's defaults: HTTP on :8081.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8081")}
}

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant). It returns after all three
// stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error { return participant.Run(ctx, cfg, Spec) }

// Spec is what makes this service itself: its tables, reactions and API.
func Spec(cfg Config) (participant.Spec, error) {
	return participant.Spec{
		Name:      Name,
		Produces:  events.TopicPayment,
		Schema:    Schema,
		Reactions: eventapi.Reactions(),
		API:       httpapi.Routes,
		Jobs:      []participant.Job{pg.ForgetOnceKeysJob("deposit_requests")},
	}, nil
}

// Schema is the service's own tables.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}
