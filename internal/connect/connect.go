// Package connect is the Debezium relay's side of Kafka Connect: the one
// definition of a service database's connector (Debezium's PostgreSQL
// connector with its Outbox Event Router) and its registration through the
// worker's REST API.
package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// Connector is one service database's connector.
type Connector struct {
	// Name is the connector's name on the worker, e.g. "choreo-order".
	Name string
	// Config is what the worker's REST API takes.
	Config map[string]string
}

// placed are the outbox columns (00002_cdc.sql) the router places as
// headers of the same names, the headers Choreo's messages carry.
var placed = []string{
	"event_id", "event_type", "traceparent",
	"dlq_reason", "dlq_reason_base64", "dlq_origin_topic", "dlq_origin_partition", "dlq_origin_offset",
	"dlq_consumer_group", "dlq_failed_at", "dlq_value_truncated", "dlq_value_bytes",
}

// For returns the connector of the database at databaseURL that holds
// service's outbox in schema (the tables' schema, "public" unless a test's
// own), with its replication slot slot (see outbox.Slot). Its passwords
// stay out of its configuration: the worker reads them from the
// connector's file in secretsDir (see WriteSecrets), and it produces as
// service's own Kafka user (identity.go).
//
// What it publishes is what the built-in relay publishes: the row's topic,
// its key and value bytes as they are (ByteArrayConverter), and as headers
// the placed columns, a dead letter's only on a dead-letter topic. The
// router places a column whose value is NULL as a header without a value,
// where the built-in relay writes none: a message without a traceparent
// carries an empty one.
func For(service, databaseURL, schema, slot, secretsDir string) (Connector, error) {
	if err := pg.ValidateURL(databaseURL); err != nil {
		return Connector{}, fmt.Errorf("connect: database URL: %w", err)
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return Connector{}, errors.New("connect: database URL: not a URL")
	}
	tls, err := tlsConfig(u.Query())
	if err != nil {
		return Connector{}, err
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	prefix := "choreo-" + service
	var placements, dlq []string
	for _, c := range placed {
		placements = append(placements, c+":header:"+c)
		if strings.HasPrefix(c, "dlq_") {
			dlq = append(dlq, c)
		}
	}
	file, err := secretsFile(secretsDir, prefix)
	if err != nil {
		return Connector{}, err
	}
	producer, err := identity(service, file)
	if err != nil {
		return Connector{}, err
	}
	c := Connector{Name: prefix, Config: map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":         "1",
		"plugin.name":       "pgoutput",
		"database.hostname": u.Hostname(),
		"database.port":     port,
		"database.user":     u.User.Username(),
		"database.dbname":   strings.TrimPrefix(u.Path, "/"),
		"topic.prefix":      prefix,
		"slot.name":         slot,
		// The service creates the publication (outbox.Publish): the
		// inserts into the outbox, refused rows left out, and the heartbeat
		// table.
		"publication.name":            outbox.Publication,
		"publication.autocreate.mode": "disabled",
		"table.include.list":          schema + ".outbox," + schema + ".outbox_heartbeat",
		// Only what is committed after the slot exists: a service waits for
		// it before it writes (outbox.AwaitSlot).
		"snapshot.mode":        "no_data",
		"binary.handling.mode": "bytes",
		// The default 500 ms adds about 0.6 s to every event.
		"poll.interval.ms": "50",
		// A heartbeat every 10 s inserts a row Debezium decodes (the
		// publication carries inserts only), so the slot moves on in an idle
		// database and the WAL behind it is freed.
		"heartbeat.interval.ms":  "10000",
		"heartbeat.action.query": "INSERT INTO " + schema + ".outbox_heartbeat (at) VALUES (now())",
		// The heartbeat records themselves go to outbox.HeartbeatTopic: the
		// slot moves on only once the worker has committed their offsets,
		// and it commits none for a record a transform drops.
		"topic.heartbeat.prefix": "__debezium-heartbeat",
		// An event's key and value are the outbox row's bytes as they are;
		// a heartbeat record (a struct) is written as JSON.
		"key.converter":                                          "io.debezium.converters.BinaryDataConverter",
		"key.converter.delegate.converter.type":                  "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.delegate.converter.type.schemas.enable":   "false",
		"value.converter":                                        "io.debezium.converters.BinaryDataConverter",
		"value.converter.delegate.converter.type":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.delegate.converter.type.schemas.enable": "false",
		"header.converter":                                       "org.apache.kafka.connect.storage.SimpleHeaderConverter",
		// No __debezium.context.* headers: only the ones placed below.
		"extended.headers.enabled": "false",

		// heartbeats: the heartbeat table's changes are dropped (the next
		// heartbeat record carries their position).
		"transforms":                                          "heartbeats,outbox,id,events",
		"transforms.heartbeats.type":                          "org.apache.kafka.connect.transforms.Filter",
		"transforms.heartbeats.predicate":                     "heartbeat",
		"predicates":                                          "heartbeat,events",
		"predicates.heartbeat.type":                           "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"predicates.heartbeat.pattern":                        regexpQuote(prefix + "." + schema + ".outbox_heartbeat"),
		"transforms.outbox.type":                              "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.field.event.id":              "event_id",
		"transforms.outbox.table.field.event.key":             "key",
		"transforms.outbox.table.field.event.payload":         "value",
		"transforms.outbox.route.by.field":                    "topic",
		"transforms.outbox.route.topic.replacement":           "${routedByValue}",
		"transforms.outbox.table.fields.additional.placement": strings.Join(placements, ","),
		"transforms.outbox.table.expand.json.payload":         "false",
		"transforms.outbox.extended.headers.enabled":          "false",
		"transforms.outbox.route.tombstone.on.empty.payload":  "false",
		// id: the router's own copy of the event id; Choreo's is event_id.
		"transforms.id.type":    "org.apache.kafka.connect.transforms.DropHeaders",
		"transforms.id.headers": "id",
		// events: an event carries no dead letter's headers.
		"transforms.events.type":      "org.apache.kafka.connect.transforms.DropHeaders",
		"transforms.events.headers":   strings.Join(dlq, ","),
		"transforms.events.predicate": "events",
		"predicates.events.type":      "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"predicates.events.pattern":   `.*\.events`,
	}}
	if _, ok := u.User.Password(); ok {
		c.Config["database.password"] = secretRef(file, keyDatabasePassword)
	}
	maps.Copy(c.Config, tls)
	maps.Copy(c.Config, producer)
	return c, nil
}

// regexpQuote escapes the dots of a topic name for TopicNameMatches.
func regexpQuote(s string) string { return strings.ReplaceAll(s, ".", `\.`) }

// Start makes the worker at base publish service's outbox in the database
// at databaseURL (its public schema): it applies the outbox schema and
// Debezium's publication (outbox.Publish), so the connector finds them
// whichever starts first, writes the connector's secrets file, registers
// the connector, and waits until it runs and its slot is consistent
// (outbox.AwaitSlot). The service's own start on OUTBOX_RELAY=debezium
// (outbox.Start) then takes the outbox over. client carries the worker's
// REST credential (see Client).
func Start(ctx context.Context, client *http.Client, base, service, databaseURL string, secrets Secrets, log *slog.Logger) (Connector, error) {
	c, err := For(service, databaseURL, "public", outbox.Slot(service), secrets.Dir)
	if err != nil {
		return Connector{}, err
	}
	if err := WriteSecrets(secrets, c.Name, databaseURL); err != nil {
		return c, err
	}
	db, err := pg.Open(ctx, databaseURL, 30*time.Second)
	if err != nil {
		return c, err
	}
	defer db.Close()
	if err := pg.Migrate(ctx, db, log, outbox.Schema); err != nil {
		return c, err
	}
	if err := outbox.Publish(ctx, db); err != nil {
		return c, err
	}
	if err := Register(ctx, client, base, c); err != nil {
		return c, err
	}
	if err := awaitRunning(ctx, client, base, c.Name, log); err != nil {
		return c, err
	}
	return c, outbox.AwaitSlot(ctx, db, outbox.Slot(service), log)
}

// awaitRunning waits until the connector name runs on the worker at base.
// A worker that does not answer, or answers 5xx, is asked again: one may
// do so for a moment after a registration, while it rebalances. A failed
// connector or task, or a refused credential, ends the wait at once.
func awaitRunning(ctx context.Context, client *http.Client, base, name string, log *slog.Logger) error {
	last := ""
	for {
		ok, err := Running(ctx, client, base, name)
		var se *outbox.StatusError
		switch {
		case errors.As(err, &se) && se.Transient():
			if err.Error() != last {
				log.Warn("the Kafka Connect worker gives no status of the connector yet; asking again", "connector", name, "err", err)
				last = err.Error()
			}
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect: %s does not run: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop undoes Start: it stops service's connector, deletes its offsets
// and then it and its secrets file in secretsDir, and drops its slot,
// which would otherwise outlive it and hold WAL for ever. Offsets left in
// Kafka would point a later Start's connector at a position its new slot
// no longer has, and its task fails. The rows not yet swept are unmarked,
// so the service's next start on Debezium publishes them again.
func Stop(ctx context.Context, client *http.Client, base, service, databaseURL, secretsDir string) error {
	name := "choreo-" + service
	if err := call(ctx, client, http.MethodPut, base, name, "/stop"); err != nil {
		return err
	}
	// Offsets can be deleted once the worker has stopped the connector.
	for {
		err := call(ctx, client, http.MethodDelete, base, name, "/offsets")
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := Delete(ctx, client, base, name); err != nil {
		return err
	}
	if err := RemoveSecrets(secretsDir, name); err != nil {
		return err
	}
	db, err := pg.Open(ctx, databaseURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	// The slot can be dropped once the connector's task has let it go.
	for {
		_, err := db.ExecContext(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, outbox.Slot(service))
		if err == nil {
			// What the slot may not have published is now pending again:
			// the next hand-over moves it across (duplicates at worst),
			// and no sweep deletes it meanwhile.
			// A database no service has migrated yet has no outbox.
			var migrated bool
			if err := db.GetContext(ctx, &migrated, `SELECT to_regclass('outbox') IS NOT NULL`); err != nil {
				return fmt.Errorf("connect: look up the outbox: %w", err)
			}
			if !migrated {
				return nil
			}
			if _, err := db.ExecContext(ctx, `UPDATE outbox SET cdc = false WHERE cdc`); err != nil {
				return fmt.Errorf("connect: unmark the unswept rows: %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connect: drop slot %s: %w", outbox.Slot(service), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// call sends an empty method request to the connector name's path on the
// worker at base, and fails unless it answers 2xx. A connector that is
// not there is not an error.
func call(ctx context.Context, client *http.Client, method, base, name, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+"/connectors/"+url.PathEscape(name)+path, nil)
	if err != nil {
		return fmt.Errorf("connect: %s: %w", name, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("connect: %s %s%s: %w", method, name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("connect: %s %s%s: %s: %s", method, name, path, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Register creates c on the worker at base (e.g. http://127.0.0.1:8183),
// or updates its configuration, so it can run on every start. A new
// connector starts without offsets: ones a deleted connector of the same
// name left in Kafka would point it at a position its slot no longer has
// (its task fails), where without any it starts at its slot's.
func Register(ctx context.Context, client *http.Client, base string, c Connector) error {
	base = strings.TrimSuffix(base, "/")
	status, err := get(ctx, client, base, c.Name)
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		return send(ctx, client, http.MethodPut, base+"/connectors/"+url.PathEscape(c.Name)+"/config", c.Config)
	}
	create := map[string]any{"name": c.Name, "config": c.Config, "initial_state": "STOPPED"}
	if err := send(ctx, client, http.MethodPost, base+"/connectors", create); err != nil {
		return err
	}
	// Offsets can be deleted once the worker has the connector stopped.
	for {
		err := call(ctx, client, http.MethodDelete, base, c.Name, "/offsets")
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return call(ctx, client, http.MethodPut, base, c.Name, "/resume")
}

// get answers the status code of GET /connectors/{name}.
func get(ctx context.Context, client *http.Client, base, name string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/connectors/"+url.PathEscape(name), nil)
	if err != nil {
		return 0, fmt.Errorf("connect: %s: %w", name, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("connect: look up %s: %w", name, err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// send sends body as JSON and fails unless the worker answers 2xx.
func send(ctx context.Context, client *http.Client, method, u string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("connect: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("connect: %s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Running reports whether the connector name and its task run on the
// worker at base, and says why a failed connector or task failed. An
// error the worker's answer caused wraps an *outbox.StatusError.
func Running(ctx context.Context, client *http.Client, base, name string) (bool, error) {
	st, err := outbox.ReadConnector(ctx, client, base, name)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	if st.Failure != "" {
		return false, fmt.Errorf("connect: %s failed: %s", name, st.Failure)
	}
	return st.Running(), nil
}

// Restart restarts the connector name and its tasks on the worker at base.
func Restart(ctx context.Context, client *http.Client, base, name string) error {
	return call(ctx, client, http.MethodPost, base, name, "/restart?includeTasks=true")
}

// Delete removes the connector name from the worker at base (its offsets
// stay in Kafka, its slot in PostgreSQL; see Stop). A connector that is not
// there is not an error.
func Delete(ctx context.Context, client *http.Client, base, name string) error {
	return call(ctx, client, http.MethodDelete, base, name, "")
}
