package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// offsetFlushTimeout is Kafka Connect's offset.flush.timeout.ms default:
// how long the worker tries to record its source offsets in Kafka before
// it gives up on that flush and tries again at the next.
const offsetFlushTimeout = 5 * time.Second

// openDB opens service's database, closed when the test ends.
func openDB(t *testing.T, service string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("postgres", dbURLs[service])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// unsentRows counts service's outbox rows for topic, keyed by one of
// orders, that no relay has marked sent.
func unsentRows(t *testing.T, service, topic string, orders []string) int {
	t.Helper()
	keys := make([][]byte, len(orders))
	for i, id := range orders {
		keys[i] = []byte(id)
	}
	var n int
	if err := openDB(t, service).Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1 AND key = ANY($2) AND sent_at IS NULL`,
		topic, pq.ByteaArray(keys)); err != nil {
		t.Fatal(err)
	}
	return n
}

// slotProgress reports whether service's Debezium connector has been sent
// its database's WAL up to lsn (the walsender of its slot has sent it) and
// whether it has confirmed it (the slot's confirmed_flush_lsn): Debezium
// confirms a position only once the worker has recorded in Kafka the
// offsets of what it published, and until then the slot holds the WAL.
func slotProgress(t *testing.T, db *sqlx.DB, service, lsn string) (received, confirmed bool) {
	t.Helper()
	err := db.QueryRow(`
		SELECT coalesce(r.sent_lsn >= $2::pg_lsn, false), coalesce(s.confirmed_flush_lsn >= $2::pg_lsn, false)
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, outbox.Slot(service), lsn).Scan(&received, &confirmed)
	if err != nil {
		t.Fatalf("slot %s: %v", outbox.Slot(service), err)
	}
	return received, confirmed
}

// awaitHeldInTheWAL, called while Kafka is down after service wrote its
// outbox, waits until service's connector has read everything written so
// far, then checks it confirms none of it for three of the worker's offset
// flush timeouts: the rows wait in the WAL, which the slot keeps, and the
// task does not give up, since Connect's producer retries a send for as
// long as it takes (delivery.timeout.ms at its maximum). It returns the WAL
// position the rows lie before.
func awaitHeldInTheWAL(t *testing.T, service string) string {
	t.Helper()
	db := openDB(t, service)
	var lsn string
	if err := db.Get(&lsn, `SELECT pg_current_wal_lsn()::text`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, service+"'s connector reads its outbox from the WAL while Kafka is down", func() bool {
		received, _ := slotProgress(t, db, service, lsn)
		return received
	})
	for end := time.Now().Add(3 * offsetFlushTimeout); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if _, confirmed := slotProgress(t, db, service, lsn); confirmed {
			t.Fatalf("%s's connector confirmed WAL position %s while Kafka is down, before it could have published what lies before it", service, lsn)
		}
	}
	return lsn
}

// awaitConfirmed waits until service's connector has confirmed the WAL up
// to lsn: it published what the slot held and recorded having done so.
func awaitConfirmed(t *testing.T, service, lsn string) {
	t.Helper()
	db := openDB(t, service)
	testenv.Eventually(t, time.Minute, service+"'s connector confirms WAL position "+lsn, func() bool {
		_, confirmed := slotProgress(t, db, service, lsn)
		return confirmed
	})
}

// connectorsRun checks that the four services' connectors and their tasks
// run on the worker at KAFKA_CONNECT_URL.
func connectorsRun(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), os.Getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"order", "payment", "inventory", "shipping"} {
		ok, err := connect.Running(ctx, client, os.Getenv("KAFKA_CONNECT_URL"), "choreo-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("connector choreo-%s or its task does not run", name)
		}
	}
}
