// This file watches the Debezium relay from the service's side
// (OUTBOX_RELAY=debezium), where the built-in relay's backlog gauges are
// not set: the replication slot in the service's database, the heartbeat
// Debezium writes there and, given the Kafka Connect worker's URL, the
// connector's state. A connector that stops leaves its slot behind, and
// the slot keeps every byte of WAL written since, until the disk fills:
// these gauges are how that is seen in minutes, not when the disk is full.
// Nothing here touches readiness: while Debezium is away the rows wait in
// the WAL and the service should go on taking orders.
// TestSlotGaugesGrowWhileNobodyConsumes and TestReadConnector show them.

package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/tick"
)

// watchEvery is how often the Debezium gauges are read.
const watchEvery = 5 * time.Second

// ConnectorName is the name of service's connector on the Kafka Connect
// worker, the one internal/connect.For gives it.
func ConnectorName(service string) string { return "choreo-" + service }

var (
	slotExists = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_slot_exists",
		Help: "1 while the Debezium connector's replication slot exists in the service's database.",
	}, []string{"service"})
	slotActive = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_slot_active",
		Help: "1 while a Debezium task is connected to the replication slot and reading it.",
	}, []string{"service"})
	slotWALStatus = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_slot_wal_status",
		Help: "1 for the slot's wal_status (reserved, extended, unreserved, lost), 0 for the others; lost: the WAL it needed is gone and it can never be read again.",
	}, []string{"service", "status"})
	slotRetained = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_slot_retained_bytes",
		Help: "WAL the replication slot keeps on disk: pg_current_wal_lsn() minus its restart_lsn.",
	}, []string{"service"})
	slotLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_slot_lag_bytes",
		Help: "WAL written that Debezium has not confirmed: pg_current_wal_lsn() minus the slot's confirmed_flush_lsn.",
	}, []string{"service"})
	heartbeatAge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_heartbeat_age_seconds",
		Help: "Age of Debezium's newest heartbeat in outbox_heartbeat, +Inf if it never wrote one; it grows once its task stops, whatever the worker says.",
	}, []string{"service"})
	connectorRunning = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_connector_running",
		Help: "1 while the Kafka Connect worker says the connector and each of its tasks are RUNNING; 0 otherwise, the worker unreachable included.",
	}, []string{"service"})
	connectorStateGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_connector_state",
		Help: "1 for the connector's state on the Kafka Connect worker (RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING, missing: not registered, unreachable: no status read), 0 for the others.",
	}, []string{"service", "state"})
	connectorTasks = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_connector_tasks",
		Help: "The connector's tasks in each state (RUNNING, PAUSED, FAILED, UNASSIGNED, RESTARTING), as the Kafka Connect worker reports them.",
	}, []string{"service", "state"})
)

// The values the gauges above are labelled with: PostgreSQL's wal_status,
// Kafka Connect's states, and the two a status read adds.
var (
	walStatuses = []string{"reserved", "extended", "unreserved", "lost"}
	taskStates  = []string{"RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "RESTARTING"}
	// connectorStates has STOPPED too: a connector, not a task, can be
	// stopped (PUT /connectors/{name}/stop).
	connectorStates = append(append([]string{}, taskStates...), "STOPPED", StateMissing, StateUnreachable)
)

// The connector states that are not Kafka Connect's.
const (
	// StateMissing: the worker knows no connector of that name (404).
	StateMissing = "missing"
	// StateUnreachable: no status could be read from the worker.
	StateUnreachable = "unreachable"
)

// SlotState is what PostgreSQL says of a replication slot, and of the
// heartbeat Debezium writes beside it.
type SlotState struct {
	Exists    bool   `db:"exists"`
	Active    bool   `db:"active"`
	WALStatus string `db:"wal_status"`
	// RetainedBytes is the WAL kept for the slot (0 if it has none).
	RetainedBytes float64 `db:"retained"`
	// LagBytes is the WAL Debezium has not confirmed (0 without a slot).
	LagBytes float64 `db:"lag"`
	// HeartbeatAge is how many seconds ago the newest heartbeat was
	// written, +Inf if none was.
	HeartbeatAge float64 `db:"heartbeat"`
}

// ReadSlot reads slot's state in db's database and the heartbeat's age
// from db's outbox_heartbeat, in one statement.
func ReadSlot(ctx context.Context, db *sqlx.DB, slot string) (SlotState, error) {
	var st SlotState
	// max(at): the heartbeat may update its one row or insert rows.
	err := db.GetContext(ctx, &st, `
		SELECT s.slot_name IS NOT NULL AS exists,
		       coalesce(s.active, false) AS active,
		       coalesce(s.wal_status, '') AS wal_status,
		       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::float8 AS retained,
		       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::float8 AS lag,
		       coalesce(extract(epoch FROM now() - (SELECT max(at) FROM outbox_heartbeat))::float8, 'Infinity') AS heartbeat
		FROM (SELECT 1) AS one
		LEFT JOIN pg_replication_slots s ON s.slot_name = $1 AND s.database = current_database()`, slot)
	if err != nil {
		return SlotState{}, fmt.Errorf("outbox: read slot %s: %w", slot, err)
	}
	return st, nil
}

// ConnectorState is what the Kafka Connect worker says of a connector.
type ConnectorState struct {
	// Connector is the connector's state, or StateMissing, or
	// StateUnreachable.
	Connector string
	// Tasks holds each task's state, in the worker's order.
	Tasks []string
	// Failure is the first line of the trace of the connector, if it
	// FAILED, or else of its first failed task: what an operator reads
	// first. A failure without a trace still sets it ("task 1 FAILED (no
	// trace)"), so a failure is never taken for a start still under way.
	Failure string
}

// StatusError is ReadConnector's error when the worker gave no status:
// Code is the HTTP status it answered, 0 if it did not answer.
type StatusError struct {
	Name string
	Code int
	Err  error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("outbox: status of connector %s: %v", e.Name, e.Err)
}

func (e *StatusError) Unwrap() error { return e.Err }

// Transient reports whether asking again may help: the worker did not
// answer, or answered 5xx, as one does while it starts or rebalances. A
// refused credential (401, 403) is not.
func (e *StatusError) Transient() bool { return e.Code == 0 || e.Code >= 500 }

// Running says whether the connector and every task of it run: a RUNNING
// connector whose task FAILED publishes nothing.
func (s ConnectorState) Running() bool {
	if s.Connector != "RUNNING" || len(s.Tasks) == 0 {
		return false
	}
	for _, t := range s.Tasks {
		if t != "RUNNING" {
			return false
		}
	}
	return true
}

// ReadConnector asks the worker at base (e.g. http://127.0.0.1:8183) for
// connector name's status. A 404 is StateMissing; no answer, or one that
// is not a status, is StateUnreachable with a *StatusError that says why.
func ReadConnector(ctx context.Context, client *http.Client, base, name string) (ConnectorState, error) {
	unreachable := ConnectorState{Connector: StateUnreachable}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimSuffix(base, "/")+"/connectors/"+url.PathEscape(name)+"/status", nil)
	if err != nil {
		return unreachable, fmt.Errorf("outbox: status of connector %s: %w", name, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return unreachable, &StatusError{Name: name, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return ConnectorState{Connector: StateMissing}, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return unreachable, &StatusError{Name: name, Code: resp.StatusCode, Err: fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))}
	}
	var status struct {
		Connector struct {
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"connector"`
		Tasks []struct {
			ID    int    `json:"id"`
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&status); err != nil {
		return unreachable, &StatusError{Name: name, Code: resp.StatusCode, Err: err}
	}
	if status.Connector.State == "" {
		return unreachable, &StatusError{Name: name, Code: resp.StatusCode, Err: errors.New("no connector state in the answer")}
	}
	st := ConnectorState{Connector: status.Connector.State}
	if st.Connector == "FAILED" {
		st.Failure = failedWith("connector", status.Connector.Trace)
	}
	for _, t := range status.Tasks {
		st.Tasks = append(st.Tasks, t.State)
		if t.State == "FAILED" && st.Failure == "" {
			st.Failure = failedWith(fmt.Sprintf("task %d", t.ID), t.Trace)
		}
	}
	return st, nil
}

// failedWith is what ConnectorState.Failure says of what (the connector, or
// task N) that FAILED with trace.
func failedWith(what, trace string) string {
	if line, _, _ := strings.Cut(trace, "\n"); strings.TrimSpace(line) != "" {
		return line
	}
	return what + " FAILED (no trace)"
}

// Watch keeps service's Debezium gauges current until ctx ends, reading
// them every watchEvery: its slot's from db, and its connector's from the
// worker at connectURL, unless that is empty. A read that fails is logged
// and tried again at the next tick; the worker being down is a state, not
// a failure, logged when the state changes.
func Watch(ctx context.Context, db *sqlx.DB, service, connectURL string, log *slog.Logger) error {
	w := newWatcher(db, service, connectURL, log)
	w.read(ctx)
	return tick.Every(ctx, watchEvery, w.read)
}

// watcher is one service's Watch: what it reads, and the connector state
// it last logged.
type watcher struct {
	db         *sqlx.DB
	service    string
	connectURL string
	client     *http.Client
	log        *slog.Logger
	last       string
}

func newWatcher(db *sqlx.DB, service, connectURL string, log *slog.Logger) *watcher {
	return &watcher{db: db, service: service, connectURL: connectURL, client: &http.Client{Timeout: 2 * time.Second}, log: log}
}

// read sets the gauges once.
func (w *watcher) read(ctx context.Context) {
	readSlot(ctx, w.db, w.service, w.log)
	if w.connectURL == "" {
		return
	}
	st, err := ReadConnector(ctx, w.client, w.connectURL, ConnectorName(w.service))
	if ctx.Err() != nil {
		return
	}
	setConnector(w.service, st)
	if now := fmt.Sprint(st); now != w.last {
		w.log.Info("Debezium connector state", "connector", ConnectorName(w.service), "state", st.Connector, "tasks", st.Tasks, "err", err)
		w.last = now
	}
}

// withWatch returns run with Watch beside it, both until ctx ends or run
// returns: Start's run in debezium mode.
func withWatch(run func(context.Context) error, db *sqlx.DB, service, connectURL string, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Watch(ctx, db, service, connectURL, log) }()
		err := run(ctx)
		cancel()
		return errors.Join(err, <-done)
	}
}

func readSlot(ctx context.Context, db *sqlx.DB, service string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	st, err := ReadSlot(ctx, db, Slot(service))
	if err != nil {
		if ctx.Err() == nil {
			// Warn: gauges left at their last values would hide the
			// very outage their alerts are for.
			log.Warn("Debezium slot gauges not updated", "err", err)
		}
		return
	}
	slotExists.WithLabelValues(service).Set(one(st.Exists))
	slotActive.WithLabelValues(service).Set(one(st.Active))
	for _, s := range walStatuses {
		slotWALStatus.WithLabelValues(service, s).Set(one(st.WALStatus == s))
	}
	slotRetained.WithLabelValues(service).Set(st.RetainedBytes)
	slotLag.WithLabelValues(service).Set(st.LagBytes)
	heartbeatAge.WithLabelValues(service).Set(st.HeartbeatAge)
}

// setConnector sets service's connector gauges to st.
func setConnector(service string, st ConnectorState) {
	connectorRunning.WithLabelValues(service).Set(one(st.Running()))
	for _, s := range connectorStates {
		connectorStateGauge.WithLabelValues(service, s).Set(one(st.Connector == s))
	}
	for _, s := range taskStates {
		n := 0
		for _, t := range st.Tasks {
			if t == s {
				n++
			}
		}
		connectorTasks.WithLabelValues(service, s).Set(float64(n))
	}
}

// one is 1 for true, 0 for false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
