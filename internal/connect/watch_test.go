package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
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
	register(t, w, d, service, producer(t, service))
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
