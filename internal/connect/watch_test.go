package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestWatchReadsARealConnector: what the service's Debezium gauges read
// (outbox.ReadSlot, outbox.ReadConnector, cdcwatch.go) from a real worker
// and its slot: a running connector has an active slot and a heartbeat
// seconds old; once the connector is stopped, the worker says STOPPED and
// the slot stays behind, inactive.
func TestWatchReadsARealConnector(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	d := database(t)
	service := "test_w" + id
	register(t, w, d, service, producer(t, service), events.DeadLetterTopic(service))
	ctx := context.Background()
	name := outbox.ConnectorName(service)

	read := func() (outbox.ConnectorState, outbox.SlotState) {
		t.Helper()
		c, err := outbox.ReadConnector(ctx, w.Client, w.URL, name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := outbox.ReadSlot(ctx, d.DB, outbox.Slot(service))
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	var c outbox.ConnectorState
	var s outbox.SlotState
	// The heartbeat comes every 10 s (heartbeat.interval.ms).
	testenv.Eventually(t, time.Minute, "a running connector, its slot active, a fresh heartbeat", func() bool {
		c, s = read()
		return c.Running() && s.Exists && s.Active && s.WALStatus == "reserved" && s.HeartbeatAge < 20
	})

	req, err := http.NewRequestWithContext(ctx, http.MethodPut, w.URL+"/connectors/"+name+"/stop", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("PUT %s/stop: %s", name, resp.Status)
	}
	testenv.Eventually(t, time.Minute, "a stopped connector, its slot left behind, inactive", func() bool {
		c, s = read()
		return c.Connector == "STOPPED" && !c.Running() && s.Exists && !s.Active
	})
	t.Logf("stopped: connector %v, slot %+v", c, s)
}

// TestHeartbeatsFreeTheWALOfAnIdleDatabase: with no outbox row written, the
// slot still confirms the WAL written meanwhile (here, a table Debezium
// does not read), so the server can free it. Only the heartbeat records
// reaching Kafka move it: the worker commits no offsets for records a
// transform drops, and Debezium confirms only committed offsets.
func TestHeartbeatsFreeTheWALOfAnIdleDatabase(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	d := database(t)
	service := "test_h" + id
	register(t, w, d, service, producer(t, service), events.DeadLetterTopic(service))
	if _, err := d.Exec(`CREATE TABLE noise (x int); INSERT INTO noise SELECT generate_series(1, 10000)`); err != nil {
		t.Fatal(err)
	}
	var written string
	if err := d.Get(&written, `SELECT pg_current_wal_insert_lsn()::text`); err != nil {
		t.Fatal(err)
	}
	// Two heartbeats (heartbeat.interval.ms 10 s) and an offset flush.
	testenv.Eventually(t, time.Minute, "the slot confirming the WAL written after its last outbox row", func() bool {
		var ok bool
		if err := d.Get(&ok, `SELECT coalesce(bool_or(confirmed_flush_lsn >= $1::pg_lsn), false) FROM pg_replication_slots WHERE slot_name = $2`, written, outbox.Slot(service)); err != nil {
			t.Fatal(err)
		}
		return ok
	})
}
