// This file holds what a service needs when Debezium, not its own Relay,
// publishes the outbox (OUTBOX_RELAY=debezium): the publication Debezium
// decodes, a wait for its replication slot, and a sweep of the rows it has
// read. The connector's configuration is internal/connect's.

package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/tick"
)

// Publication is the logical-replication publication Debezium reads: the
// outbox and the heartbeat table only, so no other change of the service's
// database is decoded.
const Publication = "choreo_outbox"

// Slot is the replication slot of service's connector, one per database.
func Slot(service string) string { return "choreo_" + service }

// Publish prepares db's outbox for Debezium: the trigger that copies each
// row's headers into the columns the connector places as headers and marks
// the row sent (outbox_cdc, 00002_cdc.sql), and Publication if it is
// missing, over the outbox tables of db's search_path.
func Publish(ctx context.Context, db *sqlx.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE OR REPLACE TRIGGER outbox_cdc BEFORE INSERT ON outbox
		FOR EACH ROW EXECUTE FUNCTION outbox_cdc()`); err != nil {
		return fmt.Errorf("outbox: create trigger: %w", err)
	}
	var exists bool
	if err := db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, Publication); err != nil {
		return fmt.Errorf("outbox: look up publication: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `CREATE PUBLICATION `+pq.QuoteIdentifier(Publication)+` FOR TABLE outbox, outbox_heartbeat`); err != nil {
		return fmt.Errorf("outbox: create publication: %w", err)
	}
	return nil
}

// Unpublish drops Publish's trigger, if there is one, so that a service
// back on its built-in relay publishes what it writes: with the trigger,
// its rows would be marked sent and never published. Switch relays with
// every instance of the service stopped, and the connector deleted.
func Unpublish(ctx context.Context, db *sqlx.DB) error {
	var exists bool
	if err := db.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_cdc' AND tgrelid = 'outbox'::regclass)`); err != nil {
		return fmt.Errorf("outbox: look up trigger: %w", err)
	}
	if !exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `DROP TRIGGER outbox_cdc ON outbox`); err != nil {
		return fmt.Errorf("outbox: drop trigger: %w", err)
	}
	return nil
}

// AwaitSlot returns once the replication slot named slot exists in db's
// database, or with ctx's error. A row committed before the slot exists is
// never decoded, so a service must not write its outbox until then.
func AwaitSlot(ctx context.Context, db *sqlx.DB, slot string, log *slog.Logger) error {
	for i := 0; ; i++ {
		var exists bool
		err := db.GetContext(ctx, &exists,
			`SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database())`, slot)
		if err != nil {
			return fmt.Errorf("outbox: look up slot %s: %w", slot, err)
		}
		if exists {
			return nil
		}
		if i%10 == 0 {
			log.Info("waiting for Debezium's replication slot: register the connector (scripts/infra.sh connect-register)", "slot", slot)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// SweepAfter is how long Sweep leaves a row in the table: an operator can
// still look at what was published. Debezium needs the row for nothing: it
// reads the insert from the WAL, which the slot keeps until Debezium
// confirms it, whatever happens to the row.
const SweepAfter = time.Minute

// Sweep deletes, every SweepAfter until ctx ends, the rows marked sent
// (by outbox_cdc, at insert) more than SweepAfter ago. Debezium recommends
// deleting the row in the transaction that inserts it; one periodic DELETE
// costs less than a second statement in every writing transaction, leaves
// Add, and so the built-in relay, as it is, and keeps the rows a minute for
// inspection.
func Sweep(ctx context.Context, db *sqlx.DB, log *slog.Logger) error {
	return tick.Every(ctx, SweepAfter, func(ctx context.Context) {
		if _, err := sweep(ctx, db, SweepAfter); err != nil && ctx.Err() == nil {
			log.Warn("outbox sweep failed", "err", err)
		}
	})
}

// sweep deletes the rows marked sent more than after ago, cleanupBatch at
// a time, oldest first (on the sent_at index, like the relay's cleanup),
// and says how many.
func sweep(ctx context.Context, db *sqlx.DB, after time.Duration) (int64, error) {
	var total int64
	for {
		res, err := db.ExecContext(ctx, `
			DELETE FROM outbox WHERE id = ANY(ARRAY(
				SELECT id FROM outbox WHERE sent_at < now() - make_interval(secs => $1)
				ORDER BY sent_at LIMIT $2))`,
			after.Seconds(), cleanupBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: sweep: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < cleanupBatch {
			return total, nil
		}
	}
}
