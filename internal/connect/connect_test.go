package connect_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestConsumersCannotTellTheRelaysApart writes the same messages through
// the built-in relay and through Debezium (a real Connect worker decoding a
// real WAL), each into a topic of its own, and compares what a consumer
// reads: partition, key, headers (names and values, in any order: the
// built-in relay writes them in map order) and value, byte for byte. The
// one difference it allows is written down: an event without a trace
// context gets a traceparent header without a value from Debezium, none
// from the built-in relay (tracing.Extract reads both as no trace).
func TestConsumersCannotTellTheRelaysApart(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	builtin := topics(t, "test.builtin-"+id)
	debezium := topics(t, "test.debezium-"+id)
	service := "test_" + id
	granted := []string{debezium["events"], debezium["dlq"]}
	password := producer(t, service, granted...)

	// Eight orders: a partitioner other than the Java client's would put
	// some key elsewhere.
	var orders []events.Envelope
	for range 8 {
		e, err := events.New("payment", uuid.NewString(), events.PaymentCompleted{CustomerID: "c-1", Amount: 1250, Currency: "EUR", Items: []events.Item{{SKU: "sku-1", Quantity: 1, UnitPrice: 1250}}, ShippingAddress: events.Address{Country: "FR", Line1: "1 rue d'Été"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, e)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	messages := func(topics map[string]string) []outbox.Message {
		var out []outbox.Message
		for _, e := range orders {
			m, err := outbox.EventMessage(topics["events"], e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		// A dead letter as park.DeadLetter writes it: the original's
		// headers and the reason and origin.
		e := orders[0]
		return append(out, outbox.Message{Topic: topics["dlq"], Key: []byte(e.OrderID), Value: []byte(`{"not":"an event"`), Headers: map[string]string{
			events.HeaderEventID: e.ID, events.HeaderEventType: e.Type,
			"dlq_reason": "payload: unexpected end of JSON input", "dlq_origin_topic": "order.events",
			"dlq_origin_partition": "2", "dlq_origin_offset": "41", "dlq_consumer_group": "payment",
			"dlq_failed_at": "2026-12-01T10:00:00.123456789Z", "dlq_reason_base64": "cGF5bG9hZA==",
			"dlq_value_truncated": "true", "dlq_value_bytes": "2000000",
		}})
	}

	relayDB := database(t)
	pub, err := testenv.Kafka(t).NewSyncProducer("connect-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	relay, err := outbox.NewRelay(outbox.RelayConfig{Name: t.Name(), DB: relayDB.DB, DatabaseURL: relayDB.url, Publisher: pub, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	testenv.Background(t, "the relay", 10*time.Second, relay.Run)

	cdcDB := database(t)
	register(t, w, cdcDB, service, password, granted...)

	// One event written outside any trace: it has no traceparent.
	untraced, err := events.New("order", uuid.NewString(), events.OrderCancelled{Reason: events.ReasonCustomerCancelled}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		db     *sqlx.DB
		topics map[string]string
	}{{relayDB.DB, builtin}, {cdcDB.DB, debezium}} {
		if err := pg.InTx(ctx, tc.db, func(tx *sqlx.Tx) error {
			for _, m := range messages(tc.topics) {
				if err := outbox.Add(ctx, tx, m); err != nil {
					return err
				}
			}
			m, err := outbox.EventMessage(tc.topics["events"], untraced)
			if err != nil {
				return err
			}
			return outbox.Add(context.Background(), tx, m)
		}); err != nil {
			t.Fatal(err)
		}
	}

	for kind, n := range map[string]int{"events": len(orders) + 1, "dlq": 1} {
		t.Run(kind, func(t *testing.T) {
			want := byKey(testenv.ReadAll(t, builtin[kind], n, 30*time.Second))
			got := byKey(testenv.ReadAll(t, debezium[kind], n, 60*time.Second))
			if len(want) != n || len(got) != n {
				t.Fatalf("built-in relay published %d keys, Debezium %d; want %d each", len(want), len(got), n)
			}
			for key, w := range want {
				g, ok := got[key]
				if !ok {
					t.Errorf("key %s: none from Debezium", key)
					continue
				}
				if g.Partition != w.Partition {
					t.Errorf("key %s: partition: Debezium %d, built-in %d", key, g.Partition, w.Partition)
				}
				if !bytes.Equal(g.Value, w.Value) {
					t.Errorf("key %s: value: Debezium %q, built-in %q", key, g.Value, w.Value)
				}
				wh := headers(w)
				if key == untraced.OrderID {
					// The one difference: the router places the NULL
					// traceparent column as a header without a value.
					wh = append(wh, "traceparent=<nil>")
					slices.Sort(wh)
					if trace.SpanContextFromContext(tracing.ExtractRecord(context.Background(), g.Headers)).IsValid() {
						t.Errorf("key %s: Debezium's empty traceparent reads as a trace context", key)
					}
				}
				if gh := headers(g); !slices.Equal(gh, wh) {
					t.Errorf("key %s: headers:\n Debezium %q\n built-in %q", key, gh, wh)
				}
			}
		})
	}
}

// byKey is msgs by their key's bytes (each key is one message here).
func byKey(msgs []*sarama.ConsumerMessage) map[string]*sarama.ConsumerMessage {
	out := map[string]*sarama.ConsumerMessage{}
	for _, m := range msgs {
		out[string(m.Key)] = m
	}
	return out
}

// topics creates prefix.events and prefix.dlq, the topic names the
// connector's header rules go by.
func topics(t *testing.T, prefix string) map[string]string {
	t.Helper()
	m := map[string]string{"events": prefix + ".events", "dlq": prefix + ".dlq"}
	testenv.Topics(t, m["events"], m["dlq"])
	return m
}

// producer makes user a Kafka user of the test's own, as a service's, that
// may write topics, and returns its password; the user goes when the test
// ends. A connector produces as its service's user, and the worker's own
// may write none of them.
func producer(t *testing.T, user string, topics ...string) string {
	t.Helper()
	admin := testenv.Admin(t)
	password := kafkaacl.NewPassword()
	salt := []byte(uuid.NewString())
	if _, err := admin.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{{
		Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512, Iterations: 8192, Salt: salt, Password: []byte(password),
	}}); err != nil {
		t.Fatalf("SCRAM user %s: %v", user, err)
	}
	principal := kafkaacl.Principal(user)
	t.Cleanup(func() {
		_, _ = admin.DeleteUserScramCredentials([]sarama.AlterUserScramCredentialsDelete{{Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512}})
		_, _ = admin.DeleteACL(sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
			Principal: &principal, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}, false)
	})
	var acls []*sarama.ResourceAcls
	allow := func(r sarama.Resource, op sarama.AclOperation) {
		acls = append(acls, &sarama.ResourceAcls{Resource: r, Acls: []*sarama.Acl{{Principal: principal, Host: "*", Operation: op, PermissionType: sarama.AclPermissionAllow}}})
	}
	// Its connector's heartbeats too, as kafkaacl grants a service.
	testenv.Topics(t, outbox.HeartbeatTopic(user))
	for _, topic := range append(topics, outbox.HeartbeatTopic(user)) {
		r := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResourcePatternType: sarama.AclPatternLiteral}
		allow(r, sarama.AclOperationWrite)
		allow(r, sarama.AclOperationDescribe)
	}
	allow(sarama.Resource{ResourceType: sarama.AclResourceCluster, ResourceName: "kafka-cluster", ResourcePatternType: sarama.AclPatternLiteral}, sarama.AclOperationIdempotentWrite)
	if err := admin.CreateACLs(acls); err != nil {
		t.Fatalf("ACLs of %s: %v", user, err)
	}
	return password
}

type db struct {
	*sqlx.DB
	url string
}

// database is a database of the test's own with the outbox schema.
func database(t *testing.T) db {
	t.Helper()
	url := testenv.OwnDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := pg.Open(ctx, url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := pg.Migrate(ctx, d, testenv.Logger(t), outbox.Schema); err != nil {
		t.Fatal(err)
	}
	return db{DB: d, url: url}
}

// register runs service's connector for d until the test ends
// (connect.Start, then connect.Stop), producing as the Kafka user service
// with password, which may write topics, and what a service on Debezium
// runs (outbox.Start).
func register(t *testing.T, w testenv.ConnectWorker, d db, service, password string, topics ...string) connect.Connector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := connect.Stop(ctx, w.Client, w.URL, service, d.url, w.SecretsDir); err != nil {
			t.Error(err)
		}
	})
	c, err := connect.Start(ctx, w.Client, w.URL, service, d.url, connect.Secrets{Dir: w.SecretsDir, KafkaPassword: password}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	// What the service does at its start on OUTBOX_RELAY=debezium: take
	// the outbox over, then sweep until it stops.
	run, closeFn, err := outbox.Start(ctx, outbox.StartConfig{Relay: outbox.RelayDebezium, Name: service, DB: d.DB, Topics: topics, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	testenv.Background(t, "the sweep", 10*time.Second, run)
	return c
}

// headers are m's headers as name=value lines, sorted; a header without a
// value reads name=<nil>.
func headers(m *sarama.ConsumerMessage) []string {
	var out []string
	for _, h := range m.Headers {
		v := string(h.Value)
		if h.Value == nil {
			v = "<nil>"
		}
		out = append(out, string(h.Key)+"="+v)
	}
	slices.Sort(out)
	return out
}

// TestOneKeysOrderSurvivesAConnectorRestart writes one order's events,
// each in a transaction of its own, and restarts the connector and its
// task while they flow: every event arrives, and the first copy of each in
// the order they were written. A restart may replay what the worker had
// not yet committed offsets for; the consumers drop those by event id.
func TestOneKeysOrderSurvivesAConnectorRestart(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	topic := topics(t, "test.restart-"+id)["events"]
	d := database(t)
	service := "test_r" + id
	register(t, w, d, service, producer(t, service, topic), topic)

	order := uuid.NewString()
	const n = 200
	var written []string
	ctx := context.Background()
	for i := range n {
		if i == n/4 {
			if err := connect.Restart(ctx, w.Client, w.URL, "choreo-"+service); err != nil {
				t.Fatal(err)
			}
		}
		e, err := events.New("order", order, events.OrderCancelled{Reason: events.ReasonCustomerCancelled}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.EventMessage(topic, e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pg.InTx(ctx, d.DB, func(tx *sqlx.Tx) error { return outbox.Add(ctx, tx, m) }); err != nil {
			t.Fatal(err)
		}
		written = append(written, e.ID)
	}

	got := testenv.ReadAll(t, topic, n, 2*time.Minute)
	seen := map[string]bool{}
	var first []string
	for _, m := range got {
		if id := testenv.Header(m, events.HeaderEventID); !seen[id] {
			seen[id] = true
			first = append(first, id)
		}
	}
	t.Logf("%d events written, %d messages read (%d replayed)", n, len(got), len(got)-len(first))
	if !slices.Equal(first, written) {
		t.Fatalf("first copies of the %d events, in arrival order, are not the order written (%d distinct arrived)", n, len(first))
	}
}

// TestNoRowIsLostOrStallsTheConnector: rows committed before the
// connector's slot existed (the service ran on the built-in relay, Kafka
// down) are published once the service starts on Debezium, in order; a row
// over the worker producer's max.request.size, or for a topic the service's
// Kafka user may not write, is refused at insert instead of killing the
// connector's task, and the row after it flows.
func TestNoRowIsLostOrStallsTheConnector(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	topic := topics(t, "test.lossless-"+id)["events"]
	other := topics(t, "test.lossless-other-"+id)["events"] // exists, but not the service's
	d := database(t)
	ctx := context.Background()
	order := uuid.NewString()
	var written []string
	write := func(topic string, value []byte) string {
		t.Helper()
		e, err := events.New("order", order, events.OrderCancelled{Reason: events.ReasonCustomerCancelled}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.EventMessage(topic, e)
		if err != nil {
			t.Fatal(err)
		}
		if value != nil {
			m.Value = value
		}
		if err := pg.InTx(ctx, d.DB, func(tx *sqlx.Tx) error { return outbox.Add(ctx, tx, m) }); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	written = append(written, write(topic, nil), write(topic, nil))
	service := "test_l" + id
	register(t, w, d, service, producer(t, service, topic), topic)
	oversize := write(topic, bytes.Repeat([]byte("x"), 1_100_000)) // over the default max.request.size, 1 MiB
	denied := write(other, nil)
	written = append(written, write(topic, nil))

	var got []string
	for _, m := range testenv.ReadAll(t, topic, len(written), time.Minute) {
		got = append(got, testenv.Header(m, events.HeaderEventID))
	}
	if !slices.Equal(got, written) {
		t.Errorf("Debezium published %q, want %q (the two written before its slot, then the one after the refused rows)", got, written)
	}
	if ok, err := connect.Running(ctx, w.Client, w.URL, "choreo-"+service); err != nil || !ok {
		t.Errorf("the connector runs: %v, %v; want true", ok, err)
	}
	refused, err := outbox.ListRefused(ctx, d.DB, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || refused[0].Bytes != 1_100_000 || !strings.Contains(refused[0].LastError, "too large") ||
		refused[1].Topic != other || !strings.Contains(refused[1].LastError, "not one this service's Debezium connector may write") {
		t.Errorf("refused rows %+v, want the oversize one (event %s) and the one for %s (event %s)", refused, oversize, other, denied)
	}
}
