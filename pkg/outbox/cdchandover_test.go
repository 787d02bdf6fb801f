package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// holdOutbox opens a transaction that wrote a row with event id id and
// keeps it open, as a long business transaction does: its lock on the
// outbox holds off CREATE TRIGGER. release commits it.
func holdOutbox(t *testing.T, db *testDB, id string) (release func()) {
	t.Helper()
	tx := db.MustBegin()
	t.Cleanup(func() { _ = tx.Rollback() })
	if err := outbox.Add(context.Background(), tx, outbox.Message{Topic: "t.events", Value: []byte("v"), Headers: map[string]string{"event_id": id}}); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// thisDatabase limits a pg_locks query to the test's own database:
// pg_locks is server-wide, and other tests run beside this one.
const thisDatabase = `database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// lockWaiter is the query that answers true while someone waits for a
// lock of kind ('relation' on the outbox, or 'advisory').
const lockWaiter = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = $1 AND ` + thisDatabase + `
	AND (locktype <> 'relation' OR relation = 'outbox'::regclass))`

// advisoryKey is how pg_locks names an advisory lock, whichever form of
// key (one int8 or two int4) took it.
const advisoryKey = `classid::text || '/' || objid::text || '/' || objsubid::text`

// relayLockKeys returns the advisory locks a built-in relay holds while it
// leads, read from pg_locks rather than worked out from its key, so that a
// change in how the key is formed does not make a test compare against a
// key nobody takes.
func relayLockKeys(t *testing.T, db *testDB) map[string]bool {
	t.Helper()
	r := newRelay(t, db, accept)
	if _, err := r.PublishOnce(context.Background()); err != nil { // elected
		t.Fatal(err)
	}
	pid, err := outbox.LeaderPID(r)
	if err != nil || pid == 0 {
		t.Fatalf("the relay's leader session: pid %d, %v; want it to lead", pid, err)
	}
	var keys []string
	if err := db.Select(&keys, `SELECT `+advisoryKey+` FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1`, pid); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("the leading relay holds no advisory lock")
	}
	r.Close()
	// Its session ends on the server a moment after Close, its locks with it.
	waitFor(t, db, "the relay's session to end", `SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND `+thisDatabase+`)`)
	held := map[string]bool{}
	for _, k := range keys {
		held[k] = true
	}
	return held
}

// handOverResult is what a hand-over run in the background returned.
type handOverResult struct {
	moved int64
	err   error
}

// handOverInBackground runs a hand-over until it returns, within a minute.
func handOverInBackground(t *testing.T, db *testDB, log *slog.Logger) <-chan handOverResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done, finished := make(chan handOverResult, 1), make(chan struct{})
	go func() {
		defer close(finished)
		moved, err := outbox.HandOverLogged(ctx, db.DB, log, testTopics...)
		done <- handOverResult{moved, err}
	}()
	t.Cleanup(func() { cancel(); <-finished })
	return done
}

// TestConcurrentHandOversBothSucceed: two instances of one service
// starting on Debezium at once both hand over; the second, which used to
// take the first's hold of the relay's lock for a built-in relay's and
// refuse, waits for the first on the hand-over's own lock and moves
// nothing more, so no row is doubled. A long transaction keeps the first
// inside its hand-over.
func TestConcurrentHandOversBothSucceed(t *testing.T) {
	db := newDB(t)
	relayKeys := relayLockKeys(t, db)
	addID(t, db, "pending-1", []byte("v"))
	addID(t, db, "pending-2", []byte("v"))
	release := holdOutbox(t, db, "long")
	first := handOverInBackground(t, db, slog.New(slog.DiscardHandler))
	waitFor(t, db, "the first hand-over to wait for the outbox", lockWaiter, "relation")
	second := handOverInBackground(t, db, slog.New(slog.DiscardHandler))
	// Generous, yet inside the 15s for which the server lets the long
	// transaction idle (pg.Open) before it ends it and frees the first.
	var waitsOn []string
	for deadline := time.Now().Add(10 * time.Second); len(waitsOn) == 0; time.Sleep(10 * time.Millisecond) {
		if err := db.Select(&waitsOn, `SELECT `+advisoryKey+` FROM pg_locks WHERE NOT granted AND locktype = 'advisory' AND `+thisDatabase); err != nil {
			t.Fatal(err)
		}
		if len(waitsOn) > 0 {
			break
		}
		select {
		case r := <-second:
			t.Fatalf("the second hand-over returned (moved %d, %v) while the first was under way; want it to wait", r.moved, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("waited 10s for the second hand-over to wait for an advisory lock")
		}
	}
	// Without the hand-over's own lock the second would wait on the
	// relay's, which the first holds too, and could not tell the first
	// from a built-in relay.
	for _, k := range waitsOn {
		if relayKeys[k] {
			t.Fatalf("the second hand-over waits on the relay's lock (%s); want it to wait on the hand-over's own", k)
		}
	}
	release()
	var moved int64
	for i, done := range []<-chan handOverResult{first, second} {
		r := <-done
		if r.err != nil {
			t.Fatalf("hand-over %d: %v", i+1, r.err)
		}
		moved += r.moved
	}
	if moved != 3 {
		t.Errorf("the hand-overs moved %d rows together, want the 3 pending", moved)
	}
	var rows []string
	if err := db.Select(&rows, `SELECT headers->>'event_id' || CASE WHEN cdc THEN '' ELSE ' (unmarked)' END FROM outbox ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rows, ","), "long,pending-1,pending-2"; got != want {
		t.Errorf("outbox rows after both hand-overs: %s, want %s, each once and marked", got, want)
	}
}

// TestHandOverBehindALongTransactionLetsWritersThrough: CREATE TRIGGER
// waits behind a transaction that wrote to the outbox, and every writer
// queues behind its lock request; the hand-over gives up its request
// after a lock timeout and tries again, saying why it waits, so a writer
// gets through while the transaction runs, and the hand-over completes
// once it ends, moving both rows.
func TestHandOverBehindALongTransactionLetsWritersThrough(t *testing.T) {
	db := newDB(t)
	release := holdOutbox(t, db, "long")
	var logs syncBuffer
	done := handOverInBackground(t, db, slog.New(slog.NewTextHandler(&logs, nil)))
	waitFor(t, db, "the hand-over to wait for the outbox", lockWaiter, "relation")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // generous: the lock timeout is 1s
	defer cancel()
	if err := outbox.Add(ctx, db, outbox.Message{Topic: "t.events", Value: []byte("v"), Headers: map[string]string{"event_id": "writer"}}); err != nil {
		t.Fatalf("a writer behind the waiting hand-over: %v; want it through within 10s", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the hand-over returned (moved %d, %v) while the transaction held the outbox", r.moved, r.err)
	default:
	}
	release()
	r := <-done
	if r.err != nil || r.moved != 2 {
		t.Fatalf("hand-over once the transaction ended: moved %d, %v; want 2, nil", r.moved, r.err)
	}
	if !strings.Contains(logs.String(), "waits") {
		t.Errorf("the hand-over did not say it waits:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer a logger may write from another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
