// This file holds what a service needs when Debezium, not its own Relay,
// publishes the outbox (OUTBOX_RELAY=debezium): the publication Debezium
// decodes, a wait for its replication slot, the switch that hands Debezium
// the rows committed before its slot, and a sweep of the rows the slot has
// confirmed. No row is deleted before Debezium confirmed it, so a lost slot
// or a switch back to the built-in relay loses nothing
// (TestSweepDeletesOnlyWhatTheSlotConfirmed, TestSwitchingToDebeziumMovesThePendingRows).
// The connector's configuration is internal/connect's.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Publication is the logical-replication publication Debezium reads: the
// inserts into the outbox and the heartbeat table, refused rows left out,
// so no other change of the service's database is decoded.
const Publication = "choreo_outbox"

// publicationTables is Publication's definition. Inserts only: a row
// filter on a table whose updates and deletes are published may name only
// replica-identity columns, and the sweep's deletes need no decoding.
const publicationTables = `TABLE outbox WHERE (refused_at IS NULL), outbox_heartbeat`

// MaxRecordBytes is the most key, value and header bytes a row may hold
// under Debezium: the Connect worker's producer sends records of at most
// max.request.size (1 MiB by default), below the broker's message.max.bytes
// (1 MiB + 12), and a record over it kills the connector's task on every
// restart. The rest of the MiB is the record's and the batch's framing.
// The built-in relay's producer has the same limit (sarama's
// Producer.MaxMessageBytes), so both relays refuse the same rows.
const MaxRecordBytes = 1_000_000

// Slot is the replication slot of service's connector, one per database.
func Slot(service string) string { return "choreo_" + service }

// HeartbeatTopic is where service's connector sends its heartbeat records
// (Debezium's default name for topic.prefix choreo-<service>; nobody reads
// them). They must reach Kafka: the worker commits no offsets for a record
// a transform drops (KAFKA-15296), Debezium confirms the slot's position
// only with committed offsets, and so an idle database whose heartbeats
// are dropped keeps its slot, and the WAL behind it, where it was.
func HeartbeatTopic(service string) string { return "__debezium-heartbeat.choreo-" + service }

// Publish creates Publication over the outbox tables of db's search_path,
// or changes it to that definition if an earlier version made it
// otherwise; pgoutput reads the change from the WAL position it commits at,
// so a running connector goes on. The connector's registration
// (internal/connect) and the service's Start both call it, whichever comes
// first.
func Publish(ctx context.Context, db *sqlx.DB) error {
	var state struct {
		Found bool `db:"found"`
		Same  bool `db:"same"`
	}
	if err := db.GetContext(ctx, &state, `
		SELECT count(*) > 0 AS found,
		       coalesce(bool_and(p.pubinsert AND NOT p.pubupdate AND NOT p.pubdelete AND NOT p.pubtruncate AND NOT p.puballtables
		         AND (SELECT array_agg(t.schemaname || '.' || t.tablename || ' ' || coalesce(t.rowfilter, '') ORDER BY t.tablename)
		              FROM pg_publication_tables t WHERE t.pubname = p.pubname)
		           = ARRAY[current_schema() || '.outbox (refused_at IS NULL)', current_schema() || '.outbox_heartbeat ']), false) AS same
		FROM pg_publication p WHERE p.pubname = $1`, Publication); err != nil {
		return fmt.Errorf("outbox: look up publication: %w", err)
	}
	name := pq.QuoteIdentifier(Publication)
	switch {
	case !state.Found:
		if _, err := db.ExecContext(ctx, `CREATE PUBLICATION `+name+` FOR `+publicationTables+` WITH (publish = 'insert')`); err != nil {
			return fmt.Errorf("outbox: create publication: %w", err)
		}
	case !state.Same:
		if _, err := db.ExecContext(ctx, `ALTER PUBLICATION `+name+` SET `+publicationTables+`;
			ALTER PUBLICATION `+name+` SET (publish = 'insert')`); err != nil {
			return fmt.Errorf("outbox: change publication: %w", err)
		}
	}
	return nil
}

// handOver makes db's outbox Debezium's, in one transaction: it refuses
// while a built-in relay leads (it would publish rows beside Debezium and
// mark them sent), installs the trigger outbox_cdc (00004_cdc_topics.sql)
// and moves the rows still pending that were written without it,
// committed before the slot and so never decoded: each is deleted and
// inserted again, same topic, key, value and headers, in (txid, id) order,
// so the slot decodes them ahead of anything written later. The lock that
// creating the trigger takes holds writers off until the move commits.
// The trigger refuses a row for any topic but topics, which the connector
// may write; a moved row it refuses is logged. It says how many rows it
// moved.
//
// An attempt that waits longer than its lock timeout for the outbox ends,
// and the next waits twice as long, up to handOverLockTimeoutMax: writers
// queue behind its request for the lock while it waits. It logs which
// sessions hold the lock, and tries until ctx ends.
func handOver(ctx context.Context, db *sqlx.DB, topics []string, log *slog.Logger) (int64, error) {
	timeout := handOverLockTimeout
	for {
		moved, err := handOverOnce(ctx, db, topics, timeout, log)
		if !lockTimedOut(err) {
			return moved, err
		}
		log.Warn("the hand-over to Debezium waits for the outbox's lock: these sessions hold it (or another instance hands over); writers go on meanwhile",
			"err", err, "holders", outboxLockHolders(ctx, db), "next_timeout", min(2*timeout, handOverLockTimeoutMax))
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("outbox: hand over to Debezium: %w", ctx.Err())
		case <-time.After(handOverRetry):
		}
		timeout = min(2*timeout, handOverLockTimeoutMax)
	}
}

// lockTimedOut reports whether err is PostgreSQL's lock_not_available:
// lock_timeout ran out.
func lockTimedOut(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "55P03"
}

// The hand-over's first wait for a lock, its longest, and the pause
// between attempts.
const (
	handOverLockTimeout    = time.Second
	handOverLockTimeoutMax = 16 * time.Second
	handOverRetry          = 100 * time.Millisecond
)

// handOverKey is the advisory lock, with the outbox table's oid, that lets
// one hand-over run at a time: a second instance's would find the first's
// hold of relayLockID and take it for a built-in relay's. It is the
// two-int4 form, whose keys never meet relayLockID's bigint ones.
const handOverKey = 0x6f757468 // "outh"

// handOverOnce is one attempt of handOver, waiting at most timeout for
// each lock.
func handOverOnce(ctx context.Context, db *sqlx.DB, topics []string, timeout time.Duration, log *slog.Logger) (moved int64, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: hand over to Debezium: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, timeout.Milliseconds())); err != nil {
		return 0, fmt.Errorf("outbox: set the hand-over's lock timeout: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, 'outbox'::regclass::oid::int4)`, handOverKey); err != nil {
		return 0, fmt.Errorf("outbox: wait for another instance's hand-over: %w", err)
	}
	// Not a try: a hand-over that just ended releases its locks one by one,
	// and this one may wake for handOverKey before the relay's lock is
	// free. Only a built-in relay holds it for longer than the timeout.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1 # 'outbox'::regclass::oid::bigint)`, relayLockID); err != nil {
		if lockTimedOut(err) {
			return 0, ErrBuiltinRelayRuns
		}
		return 0, fmt.Errorf("outbox: look for a built-in relay: %w", err)
	}
	topics, err = keepAllowed(ctx, tx, topics, log)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE OR REPLACE TRIGGER outbox_cdc BEFORE INSERT ON outbox
		FOR EACH ROW EXECUTE FUNCTION outbox_cdc(`+triggerArgs(topics)+`)`); err != nil {
		return 0, fmt.Errorf("outbox: create trigger: %w", err)
	}
	var rows []struct {
		ID        int64  `db:"id"`
		Topic     string `db:"topic"`
		EventID   string `db:"event_id"`
		LastError string `db:"last_error"`
		Refused   bool   `db:"refused"`
	}
	if err := tx.SelectContext(ctx, &rows, `
		WITH moved AS (
			DELETE FROM outbox WHERE sent_at IS NULL AND refused_at IS NULL AND NOT cdc
			RETURNING txid, id, topic, key, value, headers, created_at),
		inserted AS (
			INSERT INTO outbox (topic, key, value, headers, created_at)
			SELECT topic, key, value, headers, created_at FROM moved ORDER BY txid, id
			RETURNING id, topic, coalesce(event_id, '') AS event_id, coalesce(last_error, '') AS last_error, refused_at IS NOT NULL AS refused)
		SELECT * FROM inserted`); err != nil {
		return 0, fmt.Errorf("outbox: move the pending rows: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: hand over to Debezium: %w", err)
	}
	// Sweep's log of refused rows starts after this transaction: these
	// are said here.
	for _, rw := range rows {
		if rw.Refused {
			logRefused(log, rw.ID, rw.Topic, rw.EventID, rw.LastError)
		}
	}
	return int64(len(rows)), nil
}

// outboxLockHolders names the sessions holding a lock on the outbox, for
// the hand-over's log; an empty list if it cannot tell.
func outboxLockHolders(ctx context.Context, db *sqlx.DB) []string {
	var holders []string
	_ = db.SelectContext(ctx, &holders, `
		SELECT format('pid %s (%s since %s): %s', a.pid, a.state, a.xact_start, left(a.query, 80))
		FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.relation = 'outbox'::regclass AND l.granted AND a.pid <> pg_backend_pid()
		ORDER BY a.xact_start`)
	return holders
}

// keepAllowed returns topics with the topics the trigger allows already,
// in a rolling upgrade an instance of another version's: the trigger is
// the last starter's, and an older instance restarting must not refuse the
// rows of a topic a newer one writes (nor the reverse in a roll-back).
// A topic no instance writes any more costs nothing allowed.
func keepAllowed(ctx context.Context, tx *sqlx.Tx, topics []string, log *slog.Logger) ([]string, error) {
	var args []byte
	err := tx.GetContext(ctx, &args, `SELECT tgargs FROM pg_trigger WHERE tgname = 'outbox_cdc' AND tgrelid = 'outbox'::regclass`)
	if errors.Is(err, sql.ErrNoRows) {
		return topics, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: read the trigger's topics: %w", err)
	}
	// tgargs holds each argument followed by a NUL; the first is the size.
	parts := strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00")
	var kept []string
	for _, t := range parts[min(1, len(parts)):] {
		if !slices.Contains(topics, t) {
			kept = append(kept, t)
		}
	}
	if len(kept) > 0 {
		log.Info("the outbox trigger keeps allowing topics an instance of another version writes", "topics", topics, "kept", kept)
	}
	return append(slices.Clone(topics), kept...), nil
}

// triggerArgs are outbox_cdc's arguments (00004_cdc_topics.sql): the most
// bytes a row may hold, then the topics it may name.
func triggerArgs(topics []string) string {
	args := []string{pq.QuoteLiteral(strconv.Itoa(MaxRecordBytes))}
	for _, t := range topics {
		args = append(args, pq.QuoteLiteral(t))
	}
	return strings.Join(args, ", ")
}

// ErrBuiltinRelayRuns is Start's answer on Debezium while a built-in relay
// still leads the outbox: stop every instance on the built-in relay first.
var ErrBuiltinRelayRuns = errors.New("outbox: a built-in relay still publishes this outbox: stop every instance on OUTBOX_RELAY=builtin before switching to debezium")

// Unpublish hands db's outbox back to the built-in relay: it drops the
// trigger, if there is one, and clears the mark of the rows Debezium was
// given, so that a later switch to Debezium moves those the built-in relay
// leaves pending. Every row Sweep has not deleted is published again
// (consumers drop the duplicates by event id). Switch with every instance
// of the service stopped, and the connector deleted.
func Unpublish(ctx context.Context, db *sqlx.DB) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: unpublish: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if exists, err := DebeziumPublishes(ctx, tx); err != nil || !exists {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DROP TRIGGER outbox_cdc ON outbox`); err != nil {
		return fmt.Errorf("outbox: drop trigger: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE outbox SET cdc = false WHERE cdc`); err != nil {
		return fmt.Errorf("outbox: clear the Debezium marks: %w", err)
	}
	return tx.Commit()
}

// DebeziumPublishes reports whether Debezium publishes q's outbox: the
// trigger that handOver installs and Unpublish drops exists.
func DebeziumPublishes(ctx context.Context, q sqlx.QueryerContext) (bool, error) {
	var exists bool
	if err := sqlx.GetContext(ctx, q, &exists, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_cdc' AND tgrelid = 'outbox'::regclass)`); err != nil {
		return false, fmt.Errorf("outbox: look up trigger: %w", err)
	}
	return exists, nil
}

// AwaitSlot returns once the replication slot named slot of db's database
// has a consistent point (a slot being created is listed before it has
// one) and its WAL is not lost, or with ctx's error. A row committed before
// that point is never decoded.
func AwaitSlot(ctx context.Context, db *sqlx.DB, slot string, log *slog.Logger) error {
	for i := 0; ; i++ {
		var state struct {
			Listed bool `db:"listed"`
			Ready  bool `db:"ready"`
			Lost   bool `db:"lost"`
		}
		err := db.GetContext(ctx, &state, `
			SELECT count(*) > 0 AS listed,
			       coalesce(bool_or(confirmed_flush_lsn IS NOT NULL AND wal_status <> 'lost'), false) AS ready,
			       coalesce(bool_or(wal_status = 'lost'), false) AS lost
			FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, slot)
		if err != nil {
			return fmt.Errorf("outbox: look up slot %s: %w", slot, err)
		}
		if state.Ready {
			return nil
		}
		if i%10 == 0 {
			switch {
			case state.Lost:
				log.Error("Debezium's replication slot lost the WAL it needs: stop every instance, remove the connector (choreoctl connect-remove, which also marks the unswept rows for the next hand-over), register it again and start the instances (docs/transactional-outbox.md)", "slot", slot)
			case state.Listed:
				log.Info("waiting for Debezium's replication slot to reach a consistent point (it waits for running transactions)", "slot", slot)
			default:
				log.Info("waiting for Debezium's replication slot: register the connector (scripts/infra.sh connect-register)", "slot", slot)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// SweepAfter is how often Sweep runs, and so about how long a row stays in
// the table after Debezium confirmed it: an operator can still look at what
// was published.
const SweepAfter = time.Minute

// Sweep deletes, every SweepAfter until ctx ends, the rows service's slot
// has confirmed, refused rows aside, and the heartbeats before the last,
// and keeps the refused rows' gauge; meanwhile it keeps writers from
// notifying a relay that does not run (quietWriters, notify.go). Debezium
// recommends deleting the row in the transaction that inserts it; one
// periodic DELETE costs less than a second statement in every writing
// transaction and leaves Add as it is.
// Once the slot is gone or lost, Sweep deletes nothing more: rows written
// since may never have been decoded (switch to the built-in relay, which
// publishes them, then back).
func Sweep(ctx context.Context, db *sqlx.DB, service string, log *slog.Logger) error {
	var (
		mark    SweepMark
		halted  bool
		refused = newRefusedLog(ctx, db, log)
	)
	var quiet quietWriters
	defer quiet.release()
	quiet.hold(ctx, db, log)
	t := time.NewTicker(SweepAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		quiet.hold(ctx, db, log)
		refused.look(ctx, db, service)
		if halted {
			log.Error("Debezium's replication slot was gone or lost: the outbox is not swept; switch to OUTBOX_RELAY=builtin to publish what it may have missed", "slot", Slot(service))
			continue
		}
		next, n, err := SweepConfirmed(ctx, db, Slot(service), mark)
		switch {
		case errors.Is(err, ErrSlotGone):
			halted = true
			log.Error("Debezium's replication slot is gone or lost: rows written since may never be published; nothing is swept until the service restarts on OUTBOX_RELAY=builtin", "slot", Slot(service))
		case err != nil && ctx.Err() == nil:
			log.Warn("outbox sweep failed", "err", err)
		default:
			mark = next
			log.Debug("outbox swept", "rows", n)
		}
	}
}

// SweepMark is what one sweep round records for the next: the WAL insert
// position and the oldest transaction still running when it looked. Every
// transaction below Xmin had ended before LSN, so once the slot confirmed
// LSN, Debezium has published their rows.
type SweepMark struct {
	LSN  string // pg_lsn; empty before the first round
	Xmin string // xid8
}

// ErrSlotGone is SweepConfirmed's answer when the slot is missing, lost or
// has no consistent point.
var ErrSlotGone = errors.New("outbox: the replication slot is gone or lost")

// SweepConfirmed is one round of Sweep: if slot has confirmed mark.LSN, it
// deletes the rows of the transactions below mark.Xmin written under the
// trigger (cdc: a row connect.Stop unmarked waits for the next hand-over),
// refused ones kept,
// cleanupBatch at a time, and the heartbeats but the last; it returns the
// mark for the next round and how many rows it deleted.
func SweepConfirmed(ctx context.Context, db *sqlx.DB, slot string, mark SweepMark) (next SweepMark, deleted int64, err error) {
	reached, err := slotReached(ctx, db, slot, mark)
	if err != nil {
		return mark, 0, err
	}
	if next, err = newMark(ctx, db); err != nil {
		return mark, 0, err
	}
	// A mark not yet reached is kept, not replaced: the slot confirms a
	// transaction only once a later record follows, so a mark moved every
	// round might never be reached in a quiet outbox.
	if !reached {
		if mark.LSN == "" {
			return next, 0, nil
		}
		return mark, 0, nil
	}
	for {
		res, err := db.ExecContext(ctx, `
			DELETE FROM outbox WHERE id = ANY(ARRAY(
				SELECT id FROM outbox WHERE txid < $1::xid8 AND refused_at IS NULL AND cdc LIMIT $2))`,
			mark.Xmin, cleanupBatch)
		if err != nil {
			return mark, deleted, fmt.Errorf("outbox: sweep: %w", err)
		}
		n, _ := res.RowsAffected()
		deleted += n
		if n < cleanupBatch {
			break
		}
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM outbox_heartbeat WHERE id < (SELECT max(id) FROM outbox_heartbeat)`); err != nil {
		return mark, deleted, fmt.Errorf("outbox: sweep heartbeats: %w", err)
	}
	return next, deleted, nil
}

// slotReached reports whether slot has confirmed mark.LSN (never an empty
// mark), or ErrSlotGone.
func slotReached(ctx context.Context, db *sqlx.DB, slot string, mark SweepMark) (bool, error) {
	var confirmed struct {
		Usable  bool `db:"usable"`
		Reached bool `db:"reached"`
	}
	if err := db.GetContext(ctx, &confirmed, `
		SELECT coalesce(bool_or(confirmed_flush_lsn IS NOT NULL AND wal_status <> 'lost'), false) AS usable,
		       coalesce(bool_or($2 <> '' AND confirmed_flush_lsn >= nullif($2, '')::pg_lsn), false) AS reached
		FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, slot, mark.LSN); err != nil {
		return false, fmt.Errorf("outbox: look up slot %s: %w", slot, err)
	}
	if !confirmed.Usable {
		return false, ErrSlotGone
	}
	return confirmed.Reached, nil
}

// newMark is the mark of now.
func newMark(ctx context.Context, db *sqlx.DB) (SweepMark, error) {
	var m SweepMark
	if err := db.GetContext(ctx, &m, `SELECT pg_current_wal_insert_lsn()::text AS lsn, pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`); err != nil {
		return m, fmt.Errorf("outbox: sweep mark: %w", err)
	}
	return m, nil
}
