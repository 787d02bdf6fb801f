package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// testTopics are the topics the tests' Debezium connector may write.
var testTopics = []string{"t.events", "t"}

// addID stores a message whose event id is id, on topic "t.events".
func addID(t *testing.T, db *testDB, id string, value []byte) {
	t.Helper()
	m := outbox.Message{Topic: "t.events", Key: []byte("k-" + id), Value: value,
		Headers: map[string]string{"event_id": id, "event_type": "OrderCreated", "dlq_reason": "why"}}
	if err := outbox.Add(context.Background(), db, m); err != nil {
		t.Fatal(err)
	}
}

// TestPublishPreparesTheOutboxForDebezium: Publish (twice: each start runs
// it) turns the publication an earlier version made (every change of both
// tables) into inserts only, refused rows of the outbox left out.
func TestPublishPreparesTheOutboxForDebezium(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE PUBLICATION `+pq.QuoteIdentifier(outbox.Publication)+` FOR TABLE outbox, outbox_heartbeat`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := outbox.Publish(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
	}
	var tables []string
	if err := db.SelectContext(ctx, &tables, `SELECT tablename || ' ' || coalesce(rowfilter, '-') FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, outbox.Publication); err != nil {
		t.Fatal(err)
	}
	if want := []string{"outbox (refused_at IS NULL)", "outbox_heartbeat -"}; !slices.Equal(tables, want) {
		t.Errorf("publication covers %q, want %q", tables, want)
	}
	var ops string
	if err := db.GetContext(ctx, &ops, `SELECT concat_ws(',', CASE WHEN pubinsert THEN 'insert' END, CASE WHEN pubupdate THEN 'update' END,
		CASE WHEN pubdelete THEN 'delete' END, CASE WHEN pubtruncate THEN 'truncate' END) FROM pg_publication WHERE pubname = $1`, outbox.Publication); err != nil {
		t.Fatal(err)
	}
	if ops != "insert" {
		t.Errorf("publication publishes %s, want insert", ops)
	}
}

// TestSwitchingToDebeziumMovesThePendingRows: rows committed before the
// slot (Kafka was down, or the built-in relay lagged) are moved across at
// the hand-over, in order, so the slot decodes them; what was sent or
// refused stays as it is. After it, a row too large for the worker's
// producer is refused at insert and never decoded, the next row flows, a
// heartbeat is decoded, and the sweep's deletes are not; the header
// columns are filled. Back on the built-in relay, the trigger is gone and
// every row is published.
func TestSwitchingToDebeziumMovesThePendingRows(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	// pending-1's transaction began first but wrote last: the built-in
	// relay's order is (txid, id), and so is the move's.
	first := db.MustBegin()
	defer first.Rollback()
	if _, err := first.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "pending-2", []byte("v"))
	if err := outbox.Add(ctx, first, outbox.Message{Topic: "t.events", Value: []byte("v"), Headers: map[string]string{"event_id": "pending-1", "dlq_reason": "why"}}); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "sent", []byte("v"))
	addID(t, db, "refused", []byte("v"))
	if _, err := db.ExecContext(ctx, `UPDATE outbox SET sent_at = now() WHERE headers->>'event_id' = 'sent';
		UPDATE outbox SET refused_at = now() WHERE headers->>'event_id' = 'refused'`); err != nil {
		t.Fatal(err)
	}
	slot := newSlot(t, db, "switch")
	for range 2 { // a second instance's start moves nothing more
		if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
			t.Fatal(err)
		}
	}
	addID(t, db, "oversize", bytes.Repeat([]byte("x"), outbox.MaxRecordBytes))
	addID(t, db, "after", []byte("v"))
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox_heartbeat (at) VALUES (now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM outbox WHERE headers->>'event_id' = 'after'`); err != nil {
		t.Fatal(err)
	}

	changes := decoded(t, db, slot)
	if got, want := inserts(changes, "outbox", "event_id"), []string{"pending-1", "pending-2", "after"}; !slices.Equal(got, want) {
		t.Errorf("the slot decoded outbox inserts of %q, want %q", got, want)
	}
	if got := inserts(changes, "outbox", "dlq_reason"); len(got) == 0 || got[0] != "why" {
		t.Errorf("decoded dlq_reason columns %q, want why", got)
	}
	if n := len(inserts(changes, "outbox_heartbeat", "id")); n != 1 {
		t.Errorf("the slot decoded %d heartbeats, want 1", n)
	}
	for _, c := range changes {
		if c.Op != 'I' {
			t.Errorf("the slot decoded a %c of %s: the publication carries inserts only", c.Op, c.Table)
		}
	}
	refused, err := outbox.ListRefused(ctx, db, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || !strings.Contains(refused[1].LastError, "too large for Kafka") {
		t.Errorf("refused rows %+v; want the one refused before and the oversize one, too large for Kafka", refused)
	}

	if err := outbox.Unpublish(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "builtin", []byte("v"))
	rec := &recorder{}
	r := newRelay(t, db, rec)
	if _, err := r.PublishOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.seen(), []string{"pending-1", "pending-2", "builtin"}; !slices.Equal(got, want) {
		t.Errorf("back on the built-in relay, it published %q, want %q (the unswept rows again, and the new one)", got, want)
	}
}

// TestSwitchingBackAndForthMovesWhatIsLeft: a row written under Debezium
// and left pending by the built-in relay after a switch back (it was
// stopped before publishing it) is moved again at the next switch to
// Debezium, whose new slot has never decoded it.
func TestSwitchingBackAndForthMovesWhatIsLeft(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "under-debezium", []byte("v"))
	if err := outbox.Unpublish(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	if moved, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil || moved != 1 {
		t.Fatalf("the switch back to Debezium moved %d rows, %v; want the 1 left pending", moved, err)
	}
}

// waitFor polls query until it answers true, for up to 30 s.
func waitFor(t *testing.T, db *testDB, what, query string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var ok bool
		if err := db.Get(&ok, query, args...); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
	}
	t.Fatalf("waited 30s for %s", what)
}

// TestHandOverRefusesWhileABuiltinRelayLeads: while a built-in relay
// leads, Start on Debezium refuses and changes nothing; once it stopped,
// the hand-over goes ahead.
func TestHandOverRefusesWhileABuiltinRelayLeads(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	r := newRelay(t, db, pubFunc(func([]*sarama.ProducerMessage) error { return errors.New("kafka is down") }))
	if _, err := r.PublishOnce(ctx); err != nil { // elected
		t.Fatal(err)
	}
	addID(t, db, "pending", []byte("v"))
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); !errors.Is(err, outbox.ErrBuiltinRelayRuns) {
		t.Fatalf("hand-over while a built-in relay leads: %v, want ErrBuiltinRelayRuns", err)
	}
	var cdc bool
	if err := db.GetContext(ctx, &cdc, `SELECT cdc OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_cdc') FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if cdc {
		t.Fatal("the refused hand-over installed the trigger or moved the row")
	}
	r.Close()
	// Its session ends on the server a moment after Close, its locks with it.
	waitFor(t, db, "the relay's session to end", `SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`)
	if moved, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil || moved != 1 {
		t.Fatalf("hand-over once the relay stopped: moved %d, %v; want 1, nil", moved, err)
	}
}

// TestBuiltinRelayDoesNotLeadBesideDebezium: an instance still on the
// built-in relay after the hand-over (a rolling switch) wins the relay's
// lock once the hand-over has let it go; it publishes nothing beside
// Debezium, and leads again once the outbox is handed back.
func TestBuiltinRelayDoesNotLeadBesideDebezium(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "debeziums", []byte("v"))
	var sent []*sarama.ProducerMessage
	r := newRelay(t, db, pubFunc(func(msgs []*sarama.ProducerMessage) error { sent = append(sent, msgs...); return nil }))
	for range 3 {
		if n, err := r.PublishOnce(ctx); err != nil || n != 0 {
			t.Fatalf("a built-in relay beside Debezium published %d rows (%v), want none", n, err)
		}
	}
	if len(sent) != 0 || outbox.Leader(t.Name()) != 0 {
		t.Fatalf("sent %d messages, leader gauge %v; want nothing sent and no leader", len(sent), outbox.Leader(t.Name()))
	}
	if err := outbox.Unpublish(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	if n, err := publishSome(t, r); err != nil || n != 1 {
		t.Fatalf("once handed back the relay published %d rows (%v), want 1", n, err)
	}
}

// TestSweepDeletesOnlyWhatTheSlotConfirmed: a round deletes the rows of
// the transactions that had ended when the previous round looked, and only
// once the slot confirmed that WAL position: never a row the slot has not
// confirmed, never a refused row. Once the slot is gone, nothing more is
// deleted, and the built-in relay publishes what is left.
func TestSweepDeletesOnlyWhatTheSlotConfirmed(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	slot := newSlot(t, db, "sweep")
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO outbox (topic, value) SELECT 't', 'old' FROM generate_series(1, 12000)`); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "refused", bytes.Repeat([]byte("x"), outbox.MaxRecordBytes+1))
	left := func() map[string]int {
		t.Helper()
		var rows []struct {
			V string `db:"v"`
			N int    `db:"n"`
		}
		if err := db.SelectContext(ctx, &rows, `SELECT coalesce(headers->>'event_id', convert_from(value, 'UTF8')) AS v, count(*) AS n FROM outbox GROUP BY 1`); err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, r := range rows {
			m[r.V] = r.N
		}
		return m
	}
	advance := func() {
		t.Helper()
		if _, err := db.ExecContext(ctx, `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, slot); err != nil {
			t.Fatal(err)
		}
	}

	mark, n, err := outbox.SweepConfirmed(ctx, db.DB, slot, outbox.SweepMark{})
	if err != nil || n != 0 {
		t.Fatalf("first round: %d deleted, %v; want 0, nil", n, err)
	}
	addID(t, db, "new", []byte("v"))
	if _, n, err := outbox.SweepConfirmed(ctx, db.DB, slot, mark); err != nil || n != 0 {
		t.Fatalf("round before the slot confirmed: %d deleted, %v; want 0, nil", n, err)
	}
	advance()
	if _, n, err := outbox.SweepConfirmed(ctx, db.DB, slot, mark); err != nil || n != 12000 {
		t.Fatalf("round after the slot confirmed: %d deleted, %v; want the 12000 old rows", n, err)
	}
	if got := left(); len(got) != 2 || got["new"] != 1 || got["refused"] != 1 {
		t.Fatalf("left %v, want the new row and the refused one", got)
	}

	mark, _, err = outbox.SweepConfirmed(ctx, db.DB, slot, outbox.SweepMark{})
	if err != nil {
		t.Fatal(err)
	}
	dropSlot(t, db, slot)
	if _, n, err := outbox.SweepConfirmed(ctx, db.DB, slot, mark); !errors.Is(err, outbox.ErrSlotGone) || n != 0 {
		t.Fatalf("round without the slot: %d deleted, %v; want 0, ErrSlotGone", n, err)
	}
	if err := outbox.Unpublish(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	r := newRelay(t, db, rec)
	if _, err := r.PublishOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.seen(); !slices.Equal(got, []string{"new"}) {
		t.Errorf("back on the built-in relay, it published %q, want the unswept row", got)
	}
}

// TestAwaitSlotWaitsForAConsistentPoint: a slot being created is listed
// while it waits for the transactions running then; AwaitSlot returns only
// once it has its consistent point, from which every commit is decoded.
func TestAwaitSlotWaitsForAConsistentPoint(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	running := db.MustBegin()
	defer running.Rollback()
	if _, err := running.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	slot := outbox.Slot("await")
	created, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		_, err := db.ExecContext(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		created <- err
	}()
	t.Cleanup(func() { // the slot may be created only once running ends
		running.Rollback()
		<-done
		dropSlot(t, db, slot)
	})
	waitFor(t, db, "the slot to be listed", `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot)
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if err := outbox.AwaitSlot(short, db.DB, slot, testenv.Logger(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitSlot while the slot waits for a running transaction: %v, want it still waiting", err)
	}
	if err := running.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if err := outbox.AwaitSlot(ctx, db.DB, slot, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
}

// TestRetryUnderDebeziumReinserts: an UPDATE is not decoded, so a retried
// row is inserted again: a fixed one is decoded; one still too large is
// refused again, and the retry says so and leaves it as it was, id and
// all, so that it can be retried once fixed.
func TestRetryUnderDebeziumReinserts(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	slot := newSlot(t, db, "retry")
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	addID(t, db, "fixed", []byte("v"))
	addID(t, db, "oversize", bytes.Repeat([]byte("x"), outbox.MaxRecordBytes))
	// "fixed" was refused for a cause since fixed (its topic created).
	if _, err := db.ExecContext(ctx, `UPDATE outbox SET refused_at = now() WHERE headers->>'event_id' = 'fixed'`); err != nil {
		t.Fatal(err)
	}
	before := inserts(decoded(t, db, slot), "outbox", "event_id")
	refused, err := outbox.ListRefused(ctx, db, 10)
	if err != nil || len(refused) != 2 {
		t.Fatalf("refused rows %+v, %v; want 2", refused, err)
	}
	fixed, oversize := refused[0], refused[1]
	if ok, err := outbox.Retry(ctx, db.DB, fixed.ID); err != nil || !ok {
		t.Fatalf("retry row %d: %v, %v", fixed.ID, ok, err)
	}
	ok, err := outbox.Retry(ctx, db.DB, oversize.ID)
	var again *outbox.RefusedAgainError
	if !errors.As(err, &again) || ok || again.ID != oversize.ID || !strings.Contains(again.Reason, "too large") {
		t.Fatalf("retry of the oversize row %d: %v, %v; want a RefusedAgainError saying it is too large", oversize.ID, ok, err)
	}
	if got, want := inserts(decoded(t, db, slot), "outbox", "event_id"), append(before, "fixed"); !slices.Equal(got, want) {
		t.Errorf("after the retries the slot decoded %q, want %q", got, want)
	}
	if refused, err := outbox.ListRefused(ctx, db, 10); err != nil || len(refused) != 1 || refused[0].ID != oversize.ID || refused[0].LastError != oversize.LastError {
		t.Errorf("refused rows after the retries %+v, %v; want the oversize one as it was, %+v", refused, err, oversize)
	}
}

// TestDebeziumModeWritersDoNotNotify: with Debezium publishing, no relay
// listens, so a service on OUTBOX_RELAY=debezium keeps Add from notifying.
func TestDebeziumModeWritersDoNotNotify(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	newSlot(t, db, "quiet")
	l := pq.NewListener(db.url, 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { l.Close() })
	if err := l.Listen(outbox.Channel); err != nil {
		t.Fatal(err)
	}
	notified := func() bool { // an Add's NOTIFY arrives before a later sentinel's
		t.Helper()
		if err := outbox.Add(ctx, db, message(t, "t", anyEvent(t))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`SELECT pg_notify($1, 'sentinel')`, outbox.Channel); err != nil {
			t.Fatal(err)
		}
		for added := false; ; {
			select {
			case n := <-l.Notify:
				if n == nil {
					t.Fatal("the listener reconnected")
				}
				if n.Extra == "sentinel" {
					return added
				}
				added = true
			case <-time.After(30 * time.Second):
				t.Fatal("no sentinel notification within 30s")
			}
		}
	}
	if !notified() {
		t.Fatal("an Add did not notify before the service started: the test cannot tell")
	}
	run, closeFn, err := outbox.Start(ctx, outbox.StartConfig{Relay: outbox.RelayDebezium, Name: "quiet", DB: db.DB, Topics: testTopics, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	testenv.Background(t, "the sweep", 10*time.Second, run)
	waitFor(t, db, "the service to hold the awake lock", `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`)
	if notified() {
		t.Error("an Add notified while the service ran on Debezium")
	}
}

// TestBuiltinStartWarnsOfALeftoverSlot: a slot left behind holds WAL
// until the disk fills; the built-in relay's start says so as an error,
// with the command that drops it.
func TestBuiltinStartWarnsOfALeftoverSlot(t *testing.T) {
	db := newDB(t)
	newSlot(t, db, "left")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	noProducer := func() (sarama.SyncProducer, error) { return nil, errors.New("no producer in this test") }
	if _, _, err := outbox.Start(context.Background(), outbox.StartConfig{Relay: outbox.RelayBuiltin, Name: "left", DB: db.DB, DatabaseURL: db.url, NewProducer: noProducer, Logger: log}); err == nil {
		t.Fatal("Start without a producer did not fail")
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "pg_drop_replication_slot('choreo_left')") {
		t.Errorf("Start's log does not warn of the slot:\n%s", logs.String())
	}
}

// TestBuiltinStartRefusesWhileTheSlotIsRead: with a client still streaming
// the slot (Debezium's connector, here pg_recvlogical), the built-in relay
// would publish every row a second time: its start refuses, and leaves
// the outbox to Debezium (the trigger stays).
func TestBuiltinStartRefusesWhileTheSlotIsRead(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	slot := newSlot(t, db, "read")
	if _, err := outbox.HandOver(ctx, db.DB, testTopics...); err != nil {
		t.Fatal(err)
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_recvlogical")
	bin, err := exec.LookPath("pg_recvlogical")
	if err != nil && len(bins) == 0 {
		t.Fatal("pg_recvlogical (Debian's postgresql package, which scripts/infra.sh installs) is needed to read a slot")
	}
	if err != nil {
		bin = bins[len(bins)-1]
	}
	reader := exec.Command(bin, "-d", db.url, "--slot", slot, "--start", "-f", os.DevNull,
		"-o", "proto_version=1", "-o", "publication_names="+outbox.Publication)
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Process.Kill(); _ = reader.Wait() }()
	testenv.Eventually(t, 30*time.Second, "pg_recvlogical reading the slot", func() bool {
		var active bool
		if err := db.Get(&active, `SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = $1`, slot); err != nil {
			t.Fatal(err)
		}
		return active
	})
	noProducer := func() (sarama.SyncProducer, error) { return nil, errors.New("no producer in this test") }
	_, _, err = outbox.Start(ctx, outbox.StartConfig{Relay: outbox.RelayBuiltin, Name: "read", DB: db.DB, DatabaseURL: db.url, NewProducer: noProducer, Logger: testenv.Logger(t)})
	if err == nil || !strings.Contains(err.Error(), "Debezium still reads slot "+slot) {
		t.Fatalf("Start on the built-in relay: %v; want the refusal naming the slot", err)
	}
	var trigger bool
	if err := db.Get(&trigger, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_cdc' AND tgrelid = 'outbox'::regclass)`); err != nil || !trigger {
		t.Errorf("the trigger after the refusal: present %v (%v); want it left for Debezium", trigger, err)
	}
}
