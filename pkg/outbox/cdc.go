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
// row's headers into the columns the connector places as headers
// (00002_cdc.sql), and Publication if it is missing, over the outbox tables
// of db's search_path.
func Publish(ctx context.Context, db *sqlx.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE OR REPLACE TRIGGER outbox_headers BEFORE INSERT ON outbox
		FOR EACH ROW EXECUTE FUNCTION outbox_headers()`); err != nil {
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

// SweepAfter is how long Sweep leaves a row in the table: Debezium has
// read it from the WAL by then, which holds it until the slot confirms it
// whatever happens to the row, and an operator can still look at it.
const SweepAfter = time.Minute

// Sweep deletes, every SweepAfter until ctx ends, the rows written more
// than SweepAfter ago, a batch at a time. Debezium reads inserts from the
// WAL, so it needs the rows for nothing; one periodic DELETE costs less
// than a second statement in every writing transaction (Debezium's
// insert-then-delete), and leaves Add, and so the built-in relay, as it is.
func Sweep(ctx context.Context, db *sqlx.DB, log *slog.Logger) error {
	return tick.Every(ctx, SweepAfter, func(ctx context.Context) {
		if _, err := sweep(ctx, db, SweepAfter); err != nil && ctx.Err() == nil {
			log.Warn("outbox sweep failed", "err", err)
		}
	})
}

// sweep deletes the rows written more than after ago, cleanupBatch at a
// time, oldest first, and says how many.
func sweep(ctx context.Context, db *sqlx.DB, after time.Duration) (int64, error) {
	var total int64
	for {
		res, err := db.ExecContext(ctx, `
			DELETE FROM outbox WHERE id = ANY(ARRAY(
				SELECT id FROM outbox WHERE created_at < now() - make_interval(secs => $1)
				ORDER BY id LIMIT $2))`,
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
