package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestSlotGaugesGrowWhileNobodyConsumes is the stopped connector's
// incident in small: a logical slot nobody reads keeps every byte of WAL
// written since, and the gauges say so; once it is read up to the present,
// they fall back. Without a slot they say there is none, and the heartbeat
// age is +Inf until a heartbeat is written.
func TestSlotGaugesGrowWhileNobodyConsumes(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	log := testenv.Logger(t)
	var level string
	if err := db.GetContext(ctx, &level, `SHOW wal_level`); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("wal_level is %s: this test needs PostgreSQL with wal_level=logical, as scripts/infra.sh runs it", level)
	}
	// Slot names are the server's, not the database's: one of the test's own.
	service := "watch_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	slot := outbox.Slot(service)

	outbox.WatchOnce(ctx, db.DB, service, "", log)
	if g := outbox.SlotGauges(service); g["exists"] != 0 || g["retained"] != 0 || g["lag"] != 0 || !math.IsInf(g["heartbeat"], 1) {
		t.Fatalf("without a slot or heartbeat the gauges are %v; want exists, retained and lag 0, heartbeat +Inf", g)
	}

	// Dropped before testenv drops the database, which a slot would refuse.
	if _, err := db.ExecContext(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Error(err)
		}
	})
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox_heartbeat (id, at) VALUES (1, now() - interval '90 seconds')`); err != nil {
		t.Fatal(err)
	}
	outbox.WatchOnce(ctx, db.DB, service, "", log)
	before := outbox.SlotGauges(service)
	if before["exists"] != 1 || before["active"] != 0 || before["wal_status=reserved"] != 1 || before["wal_status=lost"] != 0 {
		t.Fatalf("with an unread slot the gauges are %v; want exists 1, active 0, wal_status reserved", before)
	}
	if h := before["heartbeat"]; h < 90 || h > 150 {
		t.Errorf("heartbeat age %.1f s for a heartbeat written 90 s ago", h)
	}

	// About 4 MB of outbox rows, 1 KB each.
	const written = 4 << 20
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox (topic, value) SELECT 't', convert_to(repeat('x', 1024), 'UTF8') FROM generate_series(1, $1)`, written/1024); err != nil {
		t.Fatal(err)
	}
	outbox.WatchOnce(ctx, db.DB, service, "", log)
	grown := outbox.SlotGauges(service)
	for _, g := range []string{"retained", "lag"} {
		if grown[g]-before[g] < written {
			t.Errorf("%s grew by %.0f bytes while %d bytes of rows were written and nobody read the slot", g, grown[g]-before[g], written)
		}
	}

	// Debezium confirming what it published moves the slot's
	// confirmed_flush_lsn at once: the lag falls.
	advance := func() {
		t.Helper()
		if _, err := db.ExecContext(ctx, `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, slot); err != nil {
			t.Fatal(err)
		}
		outbox.WatchOnce(ctx, db.DB, service, "", log)
	}
	// The WAL stays: the slot still needs it from its restart_lsn, which
	// has not moved.
	advance()
	if confirmed := outbox.SlotGauges(service); confirmed["lag"] > written/16 || confirmed["retained"] < written {
		t.Errorf("after the slot was read, lag %.0f and retained %.0f bytes (before %.0f and %.0f); want the lag down by most of the %d written, the WAL still retained",
			confirmed["lag"], confirmed["retained"], grown["lag"], grown["retained"], written)
	}
	// The WAL goes once its restart_lsn moves on, to a running-transactions
	// record it decodes: the checkpoint writes one (as the background
	// writer does every 15 s).
	if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	advance()
	if freed := outbox.SlotGauges(service); freed["retained"] > grown["retained"]-written/2 {
		t.Errorf("after the slot was read past a checkpoint, retained %.0f bytes (before %.0f); want it down by most of the %d written", freed["retained"], grown["retained"], written)
	}
}

// TestReadConnector: the connector gauges for each answer the worker's
// GET /connectors/{name}/status may give, the worker gone included, which
// is a state to report and not an error that stops the watch.
func TestReadConnector(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	status := func(connector string, tasks ...string) string {
		var ts []string
		for i, s := range tasks {
			ts = append(ts, fmt.Sprintf(`{"id":%d,"state":%q,"worker_id":"127.0.0.1:8183"}`, i, s))
		}
		return fmt.Sprintf(`{"name":"x","connector":{"state":%q,"worker_id":"127.0.0.1:8183"},"tasks":[%s],"type":"source"}`, connector, strings.Join(ts, ","))
	}
	for _, tc := range []struct {
		name   string
		code   int
		body   string
		closed bool // no worker listens
		want   map[string]float64
	}{
		{name: "running", code: 200, body: status("RUNNING", "RUNNING"),
			want: map[string]float64{"running": 1, "state=RUNNING": 1, "tasks=RUNNING": 1}},
		{name: "failed task", code: 200, body: status("RUNNING", "FAILED"),
			want: map[string]float64{"running": 0, "state=RUNNING": 1, "tasks=FAILED": 1}},
		{name: "no task yet", code: 200, body: status("RUNNING"),
			want: map[string]float64{"running": 0, "state=RUNNING": 1}},
		{name: "paused", code: 200, body: status("PAUSED", "PAUSED"),
			want: map[string]float64{"running": 0, "state=PAUSED": 1, "tasks=PAUSED": 1}},
		{name: "not registered", code: 404, body: `{"error_code":404,"message":"No status found for connector x"}`,
			want: map[string]float64{"running": 0, "state=missing": 1}},
		{name: "worker error", code: 500, body: `{"error_code":500,"message":"Request timed out"}`,
			want: map[string]float64{"running": 0, "state=unreachable": 1}},
		{name: "worker down", closed: true,
			want: map[string]float64{"running": 0, "state=unreachable": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			service := "s" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
			var asked string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.Method + " " + r.URL.Path
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				fmt.Fprint(w, tc.body)
			}))
			if tc.closed {
				srv.Close()
			} else {
				defer srv.Close()
			}
			// The gauges of the last state first, so each case shows
			// what it changes.
			outbox.SetConnector(service, outbox.ConnectorState{Connector: "FAILED", Tasks: []string{"RUNNING", "UNASSIGNED"}})
			outbox.WatchOnce(ctx, db.DB, service, srv.URL, testenv.Logger(t))
			got := outbox.ConnectorGauges(service)
			for k, v := range got {
				if v != tc.want[k] {
					t.Errorf("%s = %v, want %v (all: %v)", k, v, tc.want[k], got)
				}
			}
			if want := "GET /connectors/" + outbox.ConnectorName(service) + "/status"; !tc.closed && asked != want {
				t.Errorf("asked %q, want %q", asked, want)
			}
		})
	}
}

// TestConnectorNameIsConnects: the connector whose state is read is the
// one internal/connect registers.
func TestConnectorNameIsConnects(t *testing.T) {
	c, err := connect.For("payment", "postgres://u:p@127.0.0.1:5432/payment_db", "public", outbox.Slot("payment"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != outbox.ConnectorName("payment") {
		t.Errorf("connect.For names the connector %q, outbox.ConnectorName %q", c.Name, outbox.ConnectorName("payment"))
	}
}

// TestReadConnectorSaysWhyATaskFailed: a failed task's state carries the
// first line of its trace, the exception an operator reads first; a
// failure without a trace still says what failed, so that it is not taken
// for a connector still starting.
func TestReadConnectorSaysWhyATaskFailed(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"TaskTrace", `{"name":"x","connector":{"state":"RUNNING"},"tasks":[
			{"id":0,"state":"RUNNING"},
			{"id":1,"state":"FAILED","trace":"org.apache.kafka.connect.errors.ConnectException: boom\n\tat Worker.run(Worker.java:1)"}]}`,
			"org.apache.kafka.connect.errors.ConnectException: boom"},
		{"TaskWithoutTrace", `{"name":"x","connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"RUNNING"},{"id":1,"state":"FAILED"}]}`,
			"task 1 FAILED (no trace)"},
		{"ConnectorWithoutTrace", `{"name":"x","connector":{"state":"FAILED"},"tasks":[]}`,
			"connector FAILED (no trace)"},
		{"ConnectorTrace", `{"name":"x","connector":{"state":"FAILED","trace":"java.lang.IllegalStateException: no plugin\n\tat x"},"tasks":[]}`,
			"java.lang.IllegalStateException: no plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			st, err := outbox.ReadConnector(context.Background(), srv.Client(), srv.URL, "x")
			if err != nil {
				t.Fatal(err)
			}
			if st.Failure != tc.want || st.Running() {
				t.Errorf("state %+v, want Failure %q and not running", st, tc.want)
			}
		})
	}
}

// TestReadConnectorSaysWhetherToAskAgain: no answer, or a 5xx, is
// transient, as while a worker starts; a refused credential is not, so a
// caller that waits for the connector does not wait on it for ever.
func TestReadConnectorSaysWhetherToAskAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int // 0: no worker listens
		transient bool
	}{
		{"NoAnswer", 0, true},
		{"ServiceUnavailable", http.StatusServiceUnavailable, true},
		{"InternalError", http.StatusInternalServerError, true},
		{"Unauthorized", http.StatusUnauthorized, false},
		{"Forbidden", http.StatusForbidden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
			}))
			if tc.code == 0 {
				srv.Close()
			} else {
				defer srv.Close()
			}
			st, err := outbox.ReadConnector(context.Background(), srv.Client(), srv.URL, "x")
			var se *outbox.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("ReadConnector: %v, want a *outbox.StatusError", err)
			}
			if se.Code != tc.code || se.Transient() != tc.transient || st.Connector != outbox.StateUnreachable {
				t.Errorf("code %d, transient %v, state %s; want %d, %v, %s", se.Code, se.Transient(), st.Connector, tc.code, tc.transient, outbox.StateUnreachable)
			}
		})
	}
}
