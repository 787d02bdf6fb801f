package outbox

import (
	"context"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
)

// The relays that can publish a service's outbox (OUTBOX_RELAY).
const (
	RelayBuiltin  = "builtin"
	RelayDebezium = "debezium"
)

// Start prepares service name's outbox for relay and returns what
// publishes it until ctx ends, and what to close after. With Debezium it
// waits for the connector's slot first, since a row written before the slot
// exists would never be published, and runs only the Sweep of the rows
// Debezium has read. The built-in relay first undoes Debezium's trigger,
// left by an earlier run, which would mark its rows sent.
func Start(ctx context.Context, relay, name string, db *sqlx.DB, databaseURL, connectURL string,
	newProducer func() (sarama.SyncProducer, error), log *slog.Logger) (run func(context.Context) error, closeFn func(), err error) {
	if relay == RelayDebezium {
		if err := Publish(ctx, db); err != nil {
			return nil, nil, err
		}
		if err := AwaitSlot(ctx, db, Slot(name), log); err != nil {
			return nil, nil, err
		}
		log.Info("the outbox is published by Debezium", "slot", Slot(name), "publication", Publication)
		return withWatch(func(ctx context.Context) error { return Sweep(ctx, db, log) }, db, name, connectURL, log), func() {}, nil
	}
	if err := Unpublish(ctx, db); err != nil {
		return nil, nil, err
	}
	producer, err := newProducer()
	if err != nil {
		return nil, nil, err
	}
	r, err := NewRelay(RelayConfig{Name: name, DB: db, DatabaseURL: databaseURL, Publisher: producer, Logger: log})
	if err != nil {
		producer.Close()
		return nil, nil, err
	}
	return r.Run, func() { producer.Close() }, nil
}
