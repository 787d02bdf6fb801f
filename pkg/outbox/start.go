package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
)

// The relays that can publish a service's outbox (OUTBOX_RELAY).
const (
	RelayBuiltin  = "builtin"
	RelayDebezium = "debezium"
)

// StartConfig is what Start needs to know of a service.
type StartConfig struct {
	// Relay is RelayBuiltin or RelayDebezium (OUTBOX_RELAY).
	Relay string
	// Name is the service's name: its relay's metrics, its Debezium slot.
	Name string
	// DB is the service's database, holding the outbox table.
	DB *sqlx.DB
	// DatabaseURL is the built-in relay's, to LISTEN on.
	DatabaseURL string
	// ConnectURL is the Kafka Connect worker's, for the watch of the
	// connector under Debezium; it may be empty.
	ConnectURL string
	// Topics are the topics the service's Debezium connector may write
	// (its Kafka user's ACLs: its own topic and its dead-letter topic).
	// Under Debezium the trigger refuses a row for any other at insert: the
	// worker's producer would fail on it, and the task on every restart.
	Topics []string
	// NewProducer makes the built-in relay's producer.
	NewProducer func() (sarama.SyncProducer, error)
	// Logger receives what Start and what it returns log.
	Logger *slog.Logger
}

// Start prepares cfg.Name's outbox for cfg.Relay and returns what
// publishes it until ctx ends, and what to close after.
//
// With Debezium it makes the publication, waits for the connector's slot
// to be consistent, then hands the outbox over (handOver, cdc.go): it
// refuses while a built-in relay still leads, installs the trigger and
// moves the rows still pending across, so the slot decodes them too. It
// runs only the Sweep of what the slot has confirmed, and the watch of its
// slot and connector (cdcwatch.go).
//
// The built-in relay first takes the outbox back (Unpublish): it drops
// Debezium's trigger, left by an earlier run, and its marks, so that a later
// switch moves across what this relay leaves pending. A slot left behind
// holds WAL until the disk fills, so it says so loudly.
func Start(ctx context.Context, cfg StartConfig) (run func(context.Context) error, closeFn func(), err error) {
	name, db, log := cfg.Name, cfg.DB, cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Relay == RelayDebezium {
		if len(cfg.Topics) == 0 {
			return nil, nil, errors.New("outbox: StartConfig.Topics is empty: Debezium's trigger refuses a row for any topic but those")
		}
		if err := Publish(ctx, db); err != nil {
			return nil, nil, err
		}
		if err := AwaitSlot(ctx, db, Slot(name), log); err != nil {
			return nil, nil, err
		}
		moved, err := handOver(ctx, db, cfg.Topics, log)
		if err != nil {
			return nil, nil, err
		}
		log.Info("the outbox is published by Debezium", "slot", Slot(name), "publication", Publication, "moved_rows", moved)
		return withWatch(func(ctx context.Context) error { return Sweep(ctx, db, name, log) }, db, name, cfg.ConnectURL, log), func() {}, nil
	}
	// A connector still reading the slot would publish every row a second
	// time, without the trigger's headers or size guard: refuse, before
	// the trigger goes.
	var slotLeft, slotRead bool
	if err := db.QueryRowxContext(ctx, `SELECT count(*) > 0, coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, Slot(name)).Scan(&slotLeft, &slotRead); err != nil {
		return nil, nil, fmt.Errorf("outbox: look up slot %s: %w", Slot(name), err)
	}
	if slotRead {
		return nil, nil, fmt.Errorf("outbox: Debezium still reads slot %s: remove its connector (choreoctl connect-remove) before starting on the built-in relay", Slot(name))
	}
	if err := Unpublish(ctx, db); err != nil {
		return nil, nil, err
	}
	if slotLeft {
		log.Error("Debezium's replication slot outlives the switch to the built-in relay and holds WAL until the disk fills: remove the connector (choreoctl connect-remove), or drop the slot",
			"slot", Slot(name), "command", fmt.Sprintf("SELECT pg_drop_replication_slot('%s')", Slot(name)))
	}
	producer, err := cfg.NewProducer()
	if err != nil {
		return nil, nil, err
	}
	r, err := NewRelay(RelayConfig{Name: name, DB: db, DatabaseURL: cfg.DatabaseURL, Publisher: producer, Logger: log})
	if err != nil {
		producer.Close()
		return nil, nil, err
	}
	return r.Run, func() { producer.Close() }, nil
}
