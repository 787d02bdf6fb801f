package connect_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// TestForKeepsPasswordsOut: the connector's configuration names its
// passwords by reference to its secrets file, and WriteSecrets puts them
// there, owner-only, escaped as a Java properties file must be: a
// backslash read unescaped would vanish from the password.
func TestForKeepsPasswordsOut(t *testing.T) {
	dir := t.TempDir()
	const dbPassword, kafkaPassword = `db-s3\cret wört`, "kafka-s3cret"
	const dbPasswordEscaped = `db-s3\\cret w\u00f6rt`
	dbURL := (&url.URL{Scheme: "postgres", User: url.UserPassword("svc", dbPassword), Host: "db.example.com", Path: "/payment_db", RawQuery: "sslmode=verify-full"}).String()
	c, err := connect.For("payment", dbURL, "public", "choreo_payment", dir)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.Config {
		if strings.Contains(v, dbPassword) {
			t.Errorf("%s holds the database password: %s", k, v)
		}
	}
	file := filepath.Join(dir, "choreo-payment.properties")
	if got, want := c.Config["database.password"], "${file:"+file+":database.password}"; got != want {
		t.Errorf("database.password = %q, want %q", got, want)
	}
	jaas := c.Config["producer.override.sasl.jaas.config"]
	if !strings.Contains(jaas, `username="payment"`) || !strings.Contains(jaas, `password="${file:`+file+`:kafka.password}"`) {
		t.Errorf("producer.override.sasl.jaas.config = %q, want the payment user with its password by reference", jaas)
	}

	if err := connect.WriteSecrets(connect.Secrets{Dir: dir, KafkaPassword: kafkaPassword}, c.Name, dbURL); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("secrets file mode %v, want 0600", info.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"database.password=" + dbPasswordEscaped, "kafka.password=" + kafkaPassword} {
		if !strings.Contains(string(b), line+"\n") {
			t.Errorf("secrets file lacks %q:\n%s", line, b)
		}
	}
	if err := connect.RemoveSecrets(dir, c.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("secrets file still there after RemoveSecrets: %v", err)
	}
}

// TestConfigReadBackHoldsNoPassword registers a connector whose database
// URL has a password (the local PostgreSQL trusts loopback, so any will do)
// and reads back what the worker keeps and shows: its configuration and
// its task's through the REST API, and the worker's config topic. Neither
// password is in any of them, while the worker did resolve them: the
// connector's event arrives, written as the service's own Kafka user, the
// only one that may write its topic.
func TestConfigReadBackHoldsNoPassword(t *testing.T) {
	w := testenv.Connect(t)
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	service := "test_s" + id
	topic := topics(t, "test.secrets-"+id)["events"]
	kafkaPassword := producer(t, service, topic)
	d := database(t)
	u, err := url.Parse(d.url)
	if err != nil {
		t.Fatal(err)
	}
	dbPassword := "db-" + kafkaacl.NewPassword()
	u.User = url.UserPassword(u.User.Username(), dbPassword)
	d.url = u.String()
	c := register(t, w, d, service, kafkaPassword, topic)

	shown := map[string]string{}
	for _, path := range []string{"/connectors/" + c.Name + "/config", "/connectors/" + c.Name + "/tasks", "/connectors?expand=info"} {
		shown["GET "+path] = get(t, w, path)
	}
	shown["the config topic"] = configTopic(t)
	for where, text := range shown {
		for name, pw := range map[string]string{"database": dbPassword, "Kafka": kafkaPassword} {
			if strings.Contains(text, pw) {
				t.Errorf("%s shows the %s password", where, name)
			}
		}
	}
	var config map[string]string
	if err := json.Unmarshal([]byte(shown["GET /connectors/"+c.Name+"/config"]), &config); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(config["database.password"], "${file:") {
		t.Errorf("database.password read back as %q, want a ${file:...} reference", config["database.password"])
	}

	e, err := events.New("order", uuid.NewString(), events.OrderCancelled{Reason: events.ReasonCustomerCancelled}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := outbox.EventMessage(topic, e)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := pg.InTx(ctx, d.DB, func(tx *sqlx.Tx) error { return outbox.Add(ctx, tx, m) }); err != nil {
		t.Fatal(err)
	}
	got := testenv.ReadAll(t, topic, 1, time.Minute)
	if len(got) != 1 || testenv.Header(got[0], events.HeaderEventID) != e.ID {
		t.Errorf("read %d messages from %s in a minute, want event %s: is the connector producing as %s?", len(got), topic, e.ID, service)
	}
}

// get is the body of the worker's answer to GET path, which must be 200.
func get(t *testing.T, w testenv.ConnectWorker, path string) string {
	t.Helper()
	resp, err := w.Client.Get(w.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// configTopic is every record of the worker's config topic, as text.
func configTopic(t *testing.T) string {
	t.Helper()
	client, err := testenv.Kafka(t).NewClient("test-config-topic")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic := kafkaacl.ConnectTopics[0]
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var b strings.Builder
	timeout := time.After(30 * time.Second)
	for offset := int64(-1); offset < end-1; {
		select {
		case m := <-pc.Messages():
			offset = m.Offset
			b.Write(m.Value)
			b.WriteByte('\n')
		case <-timeout:
			t.Fatalf("%s: read up to offset %d of %d in 30 s", topic, offset, end)
		}
	}
	if !strings.Contains(b.String(), "${file:") {
		t.Fatalf("%s holds no ${file:...} reference: not the worker's config topic?", topic)
	}
	return b.String()
}
