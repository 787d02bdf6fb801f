package participant_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
)

func poison(value []byte, headers ...*sarama.RecordHeader) *sarama.ConsumerMessage {
	return &sarama.ConsumerMessage{
		Topic: "orders", Partition: 2, Offset: 42, Timestamp: time.Now(),
		Key: []byte("order-1"), Value: value, Headers: headers,
	}
}

// dlqRows returns the headers of every outbox row for topic.
func dlqRows(t *testing.T, db *sqlx.DB, topic string) []map[string]string {
	t.Helper()
	var raw [][]byte
	if err := db.Select(&raw, `SELECT headers FROM outbox WHERE topic = $1 ORDER BY id`, topic); err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]string, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDeadLetterOncePerOrigin: a poison message delivered again after a
// crash is dead-lettered once, with its origin and the reason.
func TestDeadLetterOncePerOrigin(t *testing.T) {
	db := testenv.DB(t)
	dlq := "payment.dlq." + uuid.NewString()
	deadLetter := park.DeadLetter(db, dlq, "payment")
	m := poison([]byte(`{"bad":`), &sarama.RecordHeader{Key: []byte(events.HeaderEventID), Value: []byte("ev-1")})
	for range 2 {
		if err := deadLetter(context.Background(), m, errors.New("decode: unexpected end of JSON input")); err != nil {
			t.Fatal(err)
		}
	}
	rows := dlqRows(t, db, dlq)
	if len(rows) != 1 {
		t.Fatalf("%d dead letters for one origin, want 1", len(rows))
	}
	h := rows[0]
	for k, want := range map[string]string{
		park.HeaderDLQReason:    "decode: unexpected end of JSON input",
		park.HeaderDLQTopic:     "orders",
		park.HeaderDLQPartition: "2",
		park.HeaderDLQOffset:    "42",
		park.HeaderDLQGroup:     "payment",
		events.HeaderEventID:    "ev-1",
	} {
		if h[k] != want {
			t.Errorf("header %s = %q, want %q", k, h[k], want)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, h[park.HeaderDLQFailedAt]); err != nil {
		t.Errorf("header %s: %v", park.HeaderDLQFailedAt, err)
	}
	if _, ok := h[park.HeaderDLQValueTruncated]; ok {
		t.Errorf("small value marked truncated")
	}
}

// TestDeadLetterStoresAnyMessage: the dead-letter path exists to unblock a
// consumer, so it must not fail on what PostgreSQL cannot store in jsonb or
// text (NUL, invalid UTF-8), nor produce a message Kafka refuses (a value
// near 1 MiB plus the DLQ headers). The result goes through the relay to
// Kafka.
func TestDeadLetterStoresAnyMessage(t *testing.T) {
	db := testenv.DB(t)
	dlq := testenv.Topic(t, "dlq")
	const size = 1040 << 10 // as large as the broker accepts, nearly
	value := bytes.Repeat([]byte("v"), size)
	nul := []byte("a\x00b")
	invalid := []byte{0xff, 0xfe, 'x'}
	m := poison(value,
		&sarama.RecordHeader{Key: []byte("with_nul"), Value: nul},
		&sarama.RecordHeader{Key: []byte("not_utf8"), Value: invalid},
		&sarama.RecordHeader{Key: []byte("plain"), Value: []byte("ok")},
		nil,
	)
	reason := "handler: bad byte \x00 in \xff" + strings.Repeat("r", 10<<10)

	if err := park.DeadLetter(db, dlq, "payment")(context.Background(), m, errors.New(reason)); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	publishAll(t, db, dlq)
	got := testenv.ReadAll(t, dlq, 1, 20*time.Second)
	if len(got) != 1 {
		t.Fatalf("read %d dead letters, want 1", len(got))
	}
	dl := got[0]

	if string(dl.Key) != "order-1" {
		t.Errorf("key = %q, want the original", dl.Key)
	}
	if len(dl.Value) != park.MaxDeadLetterValue || !bytes.Equal(dl.Value, value[:len(dl.Value)]) {
		t.Errorf("value: %d bytes, want the first %d of the original", len(dl.Value), park.MaxDeadLetterValue)
	}
	header := func(k string) string { return testenv.Header(dl, k) }
	if header(park.HeaderDLQValueTruncated) != "true" || header(park.HeaderDLQValueBytes) != "1064960" {
		t.Errorf("truncation headers = %q, %q; want true, 1064960",
			header(park.HeaderDLQValueTruncated), header(park.HeaderDLQValueBytes))
	}
	for k, want := range map[string][]byte{"with_nul": nul, "not_utf8": invalid} {
		if header(k) != "" {
			t.Errorf("header %s = %q, want it only base64-encoded", k, header(k))
		}
		b, err := base64.StdEncoding.DecodeString(header(k + park.Base64Suffix))
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("header %s = %q (%v), want base64 of %q", k+park.Base64Suffix, header(k+park.Base64Suffix), err, want)
		}
	}
	if header("plain") != "ok" {
		t.Errorf("header plain = %q, want it unchanged", header("plain"))
	}
	r := header(park.HeaderDLQReason)
	if !utf8.ValidString(r) || strings.ContainsRune(r, 0) || !strings.HasPrefix(r, "handler: bad byte") {
		t.Errorf("reason %.60q…: want readable UTF-8 without NUL", r)
	}
	if len(r) > 5<<10 {
		t.Errorf("reason is %d bytes, want it cut to a few KiB", len(r))
	}
	if b, err := base64.StdEncoding.DecodeString(header(park.HeaderDLQReason + park.Base64Suffix)); err != nil || !bytes.HasPrefix(b, []byte("handler: bad byte \x00 in \xff")) {
		t.Errorf("reason_base64 does not hold the exact reason: %v", err)
	}
}

// publishAll publishes the outbox rows for topic with a relay of the
// test's own, waiting until none is left unsent. Rows can be held back for
// a moment by transactions running elsewhere in the cluster.
func publishAll(t *testing.T, db *sqlx.DB, topic string) {
	t.Helper()
	p, err := testenv.Kafka(t).NewSyncProducer("participant-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r, err := outbox.NewRelay(outbox.RelayConfig{
		Name: t.Name(), DB: db, DatabaseURL: testenv.DatabaseURL(t), Publisher: p, Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	testenv.Eventually(t, 30*time.Second, "every row of "+topic+" published", func() bool {
		if _, err := r.PublishOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM outbox WHERE topic = $1 AND sent_at IS NULL`, topic); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}
