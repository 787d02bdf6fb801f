package infra_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/infra"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// These tests start the embedded infrastructure whatever the environment
// says: they test it, not the code that runs on it. CHOREO_EMBEDDED_PG picks
// where PostgreSQL comes from, so
//
//	CHOREO_EMBEDDED_PG=download go test ./internal/infra/
//
// runs them on downloaded binaries.

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func startEmbedded(t *testing.T, opts infra.EmbeddedOptions) *infra.Running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts.Logger = logger(t)
	start := time.Now()
	r, err := infra.Embedded(ctx, opts)
	if err != nil {
		t.Fatalf("Embedded: %v", err)
	}
	t.Logf("embedded infrastructure up in %s: kafka %v", time.Since(start).Round(time.Millisecond), r.Brokers())
	// Stop may run twice: here and in the test.
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

// TestEmbedded checks that the embedded broker serves what the services ask
// of Kafka through pkg/broker and pkg/consumer (topic creation, the
// idempotent producer, a consumer group committing offsets), that every
// database exists, and that Stop leaves no server, process or directory
// behind.
func TestEmbedded(t *testing.T) {
	r := startEmbedded(t, infra.EmbeddedOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if r.Mode != infra.ModeEmbedded {
		t.Errorf("Mode = %q, want %q", r.Mode, infra.ModeEmbedded)
	}
	for _, name := range infra.Databases {
		if got := currentDatabase(t, r.DatabaseURLs[name]); got != wantDatabase(name) {
			t.Errorf("database %s: connected to %q, want %q", name, got, wantDatabase(name))
		}
	}
	dataDir, pid := postmaster(t, r.DatabaseURLs["test"])

	if err := broker.Ping(ctx, r.Kafka); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	topic := "embedded.test"
	for range 2 { // the second time, "already exists" is success
		if err := broker.EnsureTopics(ctx, r.Kafka, "test", topic); err != nil {
			t.Fatalf("EnsureTopics: %v", err)
		}
	}
	if err := testenv.WaitTopics(ctx, r.Kafka, topic); err != nil {
		t.Fatal(err)
	}
	if n := partitions(t, r.Kafka, topic); n != broker.Partitions {
		t.Errorf("%s has %d partitions, want %d", topic, n, broker.Partitions)
	}

	sent := produce(t, r.Kafka, topic, 0, 30)
	group := "embedded-test"
	got := consumeGroup(t, r.Kafka, group, topic, len(sent))
	checkSameOrder(t, got, sent)

	// The group committed its offsets when it closed: a new member gets
	// only what was produced since.
	sent = produce(t, r.Kafka, topic, 30, 5)
	got = consumeGroup(t, r.Kafka, group, topic, len(sent))
	checkSameOrder(t, got, sent)

	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkGone(t, r, dataDir, pid)
}

// TestEmbeddedDataDir checks that a DataDir keeps the database, the topics,
// their messages and the groups' offsets between runs.
func TestEmbeddedDataDir(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic, group := "embedded.kept", "kept-group"

	r := startEmbedded(t, infra.EmbeddedOptions{DataDir: dir})
	db := open(t, r.DatabaseURLs["test"])
	db.MustExec(`CREATE TABLE kept (v text)`)
	db.MustExec(`INSERT INTO kept VALUES ('survives')`)
	db.Close()
	testenv.TopicsOn(t, r.Kafka, broker.DefaultTopicSettings(), topic)
	first := produce(t, r.Kafka, topic, 0, 3)
	checkSameOrder(t, consumeGroup(t, r.Kafka, group, topic, len(first)), first)
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres", "PG_VERSION")); err != nil {
		t.Fatalf("Stop removed the user's data dir: %v", err)
	}

	r = startEmbedded(t, infra.EmbeddedOptions{DataDir: dir})
	var v string
	if err := open(t, r.DatabaseURLs["test"]).GetContext(ctx, &v, `SELECT v FROM kept`); err != nil || v != "survives" {
		t.Fatalf("row after restart = %q, %v; want survives", v, err)
	}
	// The group resumes after the first run's messages; a fresh group
	// still finds them in the log.
	second := produce(t, r.Kafka, topic, 3, 2)
	checkSameOrder(t, consumeGroup(t, r.Kafka, group, topic, len(second)), second)
	checkSameOrder(t, consumeGroup(t, r.Kafka, "fresh-group", topic, len(first)+len(second)), append(first, second...))
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestEmbeddedBrokerOutage checks StopKafka and StartKafka: while the broker
// is down nothing reaches it, and afterwards a consumer group that ran
// throughout gets the rest, once, in order.
func TestEmbeddedBrokerOutage(t *testing.T) {
	r := startEmbedded(t, infra.EmbeddedOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := "embedded.outage"
	testenv.TopicsOn(t, r.Kafka, broker.DefaultTopicSettings(), topic)
	received := make(chan string, 100)
	g, err := consumer.New(consumer.Config{
		Kafka: r.Kafka, GroupID: "outage-group", Topics: []string{topic}, Logger: logger(t),
		Handler: consumer.HandlerFunc(func(_ context.Context, m *sarama.ConsumerMessage) error {
			received <- string(m.Value)
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	groupCtx, stopGroup := context.WithCancel(ctx)
	groupDone := make(chan error, 1)
	go func() { groupDone <- g.Run(groupCtx) }()
	receive := func(n int) []string {
		var got []string
		for range n {
			select {
			case v := <-received:
				got = append(got, v)
			case <-time.After(time.Minute):
				t.Fatalf("received %d of %d messages within a minute: %v", len(got), n, got)
			}
		}
		return got
	}

	sent := produce(t, r.Kafka, topic, 0, 5)
	checkSameOrder(t, receive(5), sent)

	if err := r.StopKafka(ctx); err != nil {
		t.Fatal(err)
	}
	if err := broker.Ping(ctx, r.Kafka); err == nil {
		t.Fatal("Ping succeeded while the broker is down")
	}
	time.Sleep(3 * time.Second) // the group's fetches and heartbeats fail meanwhile
	if err := r.StartKafka(ctx); err != nil {
		t.Fatal(err)
	}
	if err := broker.Ping(ctx, r.Kafka); err != nil {
		t.Fatalf("Ping after StartKafka: %v", err)
	}
	sent = produce(t, r.Kafka, topic, 5, 5)
	checkSameOrder(t, receive(5), sent)

	stopGroup()
	if err := <-groupDone; err != nil {
		t.Fatalf("group: %v", err)
	}
	select {
	case v := <-received:
		t.Errorf("message %s delivered twice", v)
	default:
	}
}

// TestEmbeddedParentKilled checks that PostgreSQL does not outlive a process
// that dies without calling Stop, here by SIGKILL.
func TestEmbeddedParentKilled(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEmbeddedThenHang$")
	cmd.Env = append(os.Environ(), "CHOREO_TEST_HELPER=1")
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The helper prints "<pid> <port> <dir>" once PostgreSQL is ready.
	var (
		pid, port int
		dir       string
	)
	if _, err := fmt.Fscan(out, &pid, &port, &dir); err != nil {
		t.Fatalf("reading the helper's postmaster pid: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("postgres (pid %d, port %d) gone after its parent was killed", pid, port), func() bool {
		return !processAlive(pid) && !portOpen(port)
	})

	// The next run removes the directory the killed one left behind.
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed helper's directory: %v", err)
	}
	infra.RemoveStaleTempDirs(logger(t))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale directory %s not removed (%v)", dir, err)
	}
}

// TestMain keeps TestHelperEmbeddedThenHang out of ordinary runs: it is
// only ever run, as a child process, by TestEmbeddedParentKilled.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("CHOREO_TEST_HELPER") != "1" {
		skip := "^TestHelperEmbeddedThenHang$"
		if prev := flag.Lookup("test.skip").Value.String(); prev != "" {
			skip = prev + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// TestHelperEmbeddedThenHang is TestEmbeddedParentKilled's child process.
func TestHelperEmbeddedThenHang(t *testing.T) {
	if os.Getenv("CHOREO_TEST_HELPER") != "1" {
		t.Fatal("runs only as TestEmbeddedParentKilled's child process")
	}
	r, err := infra.Embedded(context.Background(), infra.EmbeddedOptions{Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	data, pid := postmaster(t, r.DatabaseURLs["test"])
	u, _ := url.Parse(r.DatabaseURLs["test"])
	fmt.Printf("%d %s %s\n", pid, u.Port(), filepath.Dir(data))
	select {} // until killed
}

func wantDatabase(name string) string {
	if name == "test" {
		return "choreo_test"
	}
	return name + "_db"
}

func open(t *testing.T, u string) *sqlx.DB {
	t.Helper()
	db, err := pg.Open(context.Background(), u, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func currentDatabase(t *testing.T, u string) string {
	t.Helper()
	var name string
	if err := open(t, u).Get(&name, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	return name
}

// postmaster returns the server's data directory and process id.
func postmaster(t *testing.T, u string) (string, int) {
	t.Helper()
	var dir string
	if err := open(t, u).Get(&dir, `SHOW data_directory`); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	return dir, pid
}

func partitions(t *testing.T, conn broker.Conn, topic string) int {
	t.Helper()
	c, err := conn.NewClient("test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// produce sends n messages through the services' idempotent producer, keyed
// over five keys, and returns their values as "key/seq".
func produce(t *testing.T, conn broker.Conn, topic string, from, n int) []string {
	t.Helper()
	// After a restart the broker serves the topic again only once it has
	// loaded it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testenv.WaitTopics(ctx, conn, topic); err != nil {
		t.Fatal(err)
	}
	p, err := conn.NewSyncProducer("test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var sent []string
	for i := from; i < from+n; i++ {
		key := fmt.Sprintf("k%d", i%5)
		v := fmt.Sprintf("%s/%d", key, i)
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(v),
		}); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		sent = append(sent, v)
	}
	return sent
}

// consumeGroup runs a pkg/consumer group until it has handled want
// messages and stops it, which commits their offsets. It fails if more
// arrive in the meantime.
func consumeGroup(t *testing.T, conn broker.Conn, group, topic string, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		got []string
	)
	g, err := consumer.New(consumer.Config{
		Kafka: conn, GroupID: group, Topics: []string{topic}, Logger: logger(t),
		Handler: consumer.HandlerFunc(func(_ context.Context, m *sarama.ConsumerMessage) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(m.Value))
			if len(got) == want {
				// Give a surplus message a moment to show up.
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			return nil
		}),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := g.Run(ctx); err != nil {
		t.Fatalf("group %s: %v", group, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		t.Fatalf("group %s got %d messages in %s, want %d: %v", group, len(got), time.Since(start).Round(time.Millisecond), want, got)
	}
	t.Logf("group %s handled %d messages in %s", group, want, time.Since(start).Round(time.Millisecond))
	return got
}

// checkSameOrder checks that got holds the messages of sent, each key's in
// the order sent (Kafka orders per partition, hence per key).
func checkSameOrder(t *testing.T, got, sent []string) {
	t.Helper()
	byKey := func(vs []string) map[string][]string {
		m := map[string][]string{}
		for _, v := range vs {
			k, _, _ := strings.Cut(v, "/")
			m[k] = append(m[k], v)
		}
		return m
	}
	g, s := byKey(got), byKey(sent)
	if len(got) != len(sent) {
		t.Fatalf("got %d messages, want %d", len(got), len(sent))
	}
	for k, want := range s {
		if strings.Join(g[k], " ") != strings.Join(want, " ") {
			t.Errorf("key %s: got %v, want %v", k, g[k], want)
		}
	}
}

// checkGone checks that after Stop nothing listens, the postmaster has
// exited and the temporary directory is gone.
func checkGone(t *testing.T, r *infra.Running, dataDir string, pid int) {
	t.Helper()
	u, _ := url.Parse(r.DatabaseURLs["test"])
	port, _ := strconv.Atoi(u.Port())
	if portOpen(port) {
		t.Errorf("PostgreSQL still listens on %d after Stop", port)
	}
	if processAlive(pid) {
		t.Errorf("postmaster %d still runs after Stop", pid)
	}
	for _, b := range r.Brokers() {
		if c, err := net.DialTimeout("tcp", b, time.Second); err == nil {
			c.Close()
			t.Errorf("the broker still listens on %s after Stop", b)
		}
	}
	if _, err := os.Stat(filepath.Dir(dataDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s still exists after Stop (%v)", filepath.Dir(dataDir), err)
	}
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// processAlive reports whether pid runs; a zombie, which an init that does
// not reap would leave behind, does not count.
func processAlive(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return false
		}
	}
	return syscall.Kill(pid, 0) == nil
}
