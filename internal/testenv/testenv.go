// Package testenv gives tests a Kafka and a PostgreSQL, and fails a test
// that has neither, saying how to start them: tests never skip.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/infra"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// HowToStart is appended to every failure caused by missing infrastructure.
const HowToStart = infra.HowToStart

var current *infra.Running

// Main finds or starts the infrastructure, runs the package's tests, and
// stops what it started. Every package whose tests touch Kafka or
// PostgreSQL calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
func Main(m *testing.M) int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := infra.Discover(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testenv: using %s infrastructure (Kafka %s)\n", r.Mode, strings.Join(r.Brokers(), ","))
	current = r
	code := 1
	if err := Report(r); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
	} else {
		code = m.Run()
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	return code
}

// Infra returns what Main found, failing the test if Main was not used.
func Infra(t testing.TB) *infra.Running {
	t.Helper()
	if current == nil {
		t.Fatal("testenv.Main was not called: add func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }")
	}
	return current
}

// DatabaseURL returns the URL of the database reserved for package tests.
func DatabaseURL(t testing.TB) string { t.Helper(); return Infra(t).DatabaseURLs["test"] }

// Kafka returns the connection to the Kafka brokers as the administrator,
// who may create, read and write any topic and use any group.
func Kafka(t testing.TB) broker.Conn { t.Helper(); return Infra(t).Kafka }

// Brokers returns the Kafka bootstrap addresses.
func Brokers(t testing.TB) []string { t.Helper(); return Infra(t).Brokers() }

// Logger returns a logger that writes to stderr when -v is given and
// discards otherwise.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// DB connects to the test database inside a fresh PostgreSQL schema of its
// own, applies the idem and outbox schemas and the given ones there, and
// drops it when the test ends. Tests thus share one database server but never
// see each other's rows — an outbox relay under test publishes only its own.
func DB(t testing.TB, schemas ...pg.Schema) *sqlx.DB {
	t.Helper()
	base := DatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := openAdmin(ctx, t, base)
	defer admin.Close()
	ns := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+ns); err != nil {
		t.Fatalf("create schema: %v", err)
	}

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("test database URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", ns) // lib/pq passes it on as a run-time parameter
	u.RawQuery = q.Encode()
	db, err := pg.Open(ctx, u.String(), 10*time.Second)
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	t.Cleanup(func() {
		db.Close()
		if admin, err := pg.Open(context.Background(), base, 10*time.Second); err == nil {
			admin.Exec(`DROP SCHEMA ` + ns + ` CASCADE`)
			admin.Close()
		}
	})
	all := append([]pg.Schema{idem.Schema, outbox.Schema, park.Schema}, schemas...)
	if err := pg.Migrate(ctx, db, Logger(t), all...); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// openAdmin connects to the test server's shared database at base, to
// create a schema or database of a test's own, failing the test and
// saying how to start the infrastructure when no server answers.
func openAdmin(ctx context.Context, t testing.TB, base string) *sqlx.DB {
	t.Helper()
	admin, err := pg.Open(ctx, base, 10*time.Second)
	if err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
	return admin
}

// Topic creates a fresh topic with a unique name, waits until it is served
// (Topics), and returns it.
func Topic(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("test.%s.%s", prefix, uuid.NewString()[:8])
	Topics(t, name)
	return name
}

// ReadAll reads a topic from the oldest offset until it has seen want
// messages or the deadline passes, and returns what it read.
func ReadAll(t testing.TB, topic string, want int, within time.Duration) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := Kafka(t).NewConsumer("test-reader")
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	out := make(chan *sarama.ConsumerMessage)
	done := make(chan struct{})
	defer close(done)
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %s/%d: %v", topic, p, err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				select {
				case out <- m:
				case <-done:
					return
				}
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	deadline := time.After(within)
	for len(got) < want {
		select {
		case m := <-out:
			got = append(got, m)
		case <-deadline:
			return got
		}
	}
	// Linger briefly so that extra (duplicate) messages are seen too.
	linger := time.After(1500 * time.Millisecond)
	for {
		select {
		case m := <-out:
			got = append(got, m)
		case <-linger:
			return got
		}
	}
}

// Header returns the value of header key in m, or "".
func Header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// StartAtEnd commits, for consumer group, the newest offset of every
// partition of topics, so that a group the test is about to start reads
// only what is produced from now on — not the history of a broker that
// other tests and runs have filled (a new group reads from the oldest).
func StartAtEnd(t testing.TB, group string, topics ...string) {
	t.Helper()
	if err := SkipToEnd(Kafka(t), group, topics...); err != nil {
		t.Fatalf("%v; %s", err, HowToStart)
	}
}

// SkipToEnd is StartAtEnd for callers without a testing.TB (TestMain).
func SkipToEnd(conn broker.Conn, group string, topics ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), topicsBound)
	defer cancel()
	// On a fresh broker the topics may not exist yet; the services create
	// them with the same defaults.
	if err := broker.EnsureTopics(ctx, conn, "test", topics...); err != nil {
		return err
	}
	if err := WaitTopics(ctx, conn, topics...); err != nil {
		return err
	}
	client, err := conn.NewClient(group)
	if err != nil {
		return err
	}
	defer client.Close()
	// A commit outside any generation, as kafka-consumer-groups
	// --reset-offsets makes: it creates the group with these offsets.
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: group, ConsumerGroupGeneration: -1}
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			return err
		}
		for _, p := range parts {
			newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				return err
			}
			req.AddBlock(topic, p, newest, 0, "")
		}
	}
	// A fresh broker creates its offsets topic on the first group's
	// request and is no group's coordinator until that topic is led and
	// loaded: the commit is retried until the coordinator takes it.
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := commitOnce(client, group, req)
		if err == nil || !coordinatorStarting(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: commit the end offsets for %s: %w (last: %w)", group, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// commitOnce sends req to group's coordinator and returns the first error
// of the request or of a partition.
func commitOnce(client sarama.Client, group string, req *sarama.OffsetCommitRequest) error {
	if err := client.RefreshCoordinator(group); err != nil {
		return err
	}
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return err
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		return err
	}
	for topic, parts := range resp.Errors {
		for p, kerr := range parts {
			if kerr != sarama.ErrNoError {
				return fmt.Errorf("commit %s/%d for %s: %w", topic, p, group, kerr)
			}
		}
	}
	return nil
}

// coordinatorStarting reports whether err says the group's coordinator is
// not ready yet, as on a broker that has just started.
func coordinatorStarting(err error) bool {
	return errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) ||
		errors.Is(err, sarama.ErrNotCoordinatorForConsumer) ||
		errors.Is(err, sarama.ErrOffsetsLoadInProgress)
}

// Store opens a service's store with open (its store.New) on a database
// of the test's own with schema in place (DB), and returns the database
// too, for what a test writes or reads past the store.
func Store[S any](t testing.TB, schema pg.Schema, open func(*sqlx.DB) S) (*sqlx.DB, S) {
	t.Helper()
	db := DB(t, schema)
	return db, open(db)
}
