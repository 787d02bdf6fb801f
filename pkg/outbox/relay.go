package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Publisher is the part of sarama.SyncProducer the relay needs. The producer
// must be configured with RequiredAcks = sarama.WaitForAll, so a message
// counts as published only once every in-sync replica has it.
type Publisher interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// Metrics, labelled by the relay's Name: the oldest unsent row's age is the
// one to alert on — it grows while Kafka is unreachable, and events wait.
var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_published_total",
		Help: "Outbox rows published to Kafka and marked sent.",
	}, []string{"relay"})
	publishFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_publish_failures_total",
		Help: "Relay rounds that failed and will be retried.",
	}, []string{"relay"})
	oldestUnsent = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_oldest_unsent_seconds",
		Help: "Age of the oldest outbox row not yet published, 0 when none waits.",
	}, []string{"relay"})
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Name labels the relay's metrics and logs, e.g. the service name.
	Name string
	// DB is the service's database, holding the outbox table.
	DB *sqlx.DB
	// DatabaseURL is used to LISTEN for new rows on a dedicated connection.
	DatabaseURL string
	// Publisher sends batches to Kafka.
	Publisher Publisher
	// Logger receives one line per published batch and every failure.
	Logger *slog.Logger
	// BatchSize caps the rows published per round trip. Default 256.
	BatchSize int
	// PollInterval is the safety-net poll for notifications that were
	// missed, e.g. while the LISTEN connection was reconnecting. Default 2s.
	PollInterval time.Duration
	// Retention is how long sent rows are kept for inspection before they
	// are deleted. Default 1h.
	Retention time.Duration
}

func (c *RelayConfig) setDefaults() {
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a missing dependency.
func (c RelayConfig) Validate() error {
	switch {
	case c.DB == nil:
		return errors.New("outbox: RelayConfig.DB is nil")
	case c.DatabaseURL == "":
		return errors.New("outbox: RelayConfig.DatabaseURL is empty")
	case c.Publisher == nil:
		return errors.New("outbox: RelayConfig.Publisher is nil")
	}
	return nil
}

// Relay publishes outbox rows to Kafka and marks them sent.
//
// Guarantees:
//   - at least once: a row is marked sent only after Kafka acknowledged it,
//     in the same transaction that selected it; a crash in between publishes
//     it again, and consumers drop the duplicate by event id;
//   - no skipped rows: Flush reads only rows whose writing transaction is
//     older than every transaction still running (txid below the snapshot's
//     xmin), so a row that commits late, after a higher id was already
//     visible, is held back rather than overtaken, and never passed by;
//   - per-order order: rows go out in (txid, id) order and Kafka keeps the
//     order of one key within its partition;
//   - one active relay per database: a transaction-scoped advisory lock
//     makes a second relay skip the round instead of publishing the same
//     rows concurrently.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger
}

// NewRelay returns a Relay, or an error if cfg is incomplete.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg, log: cfg.Logger.With("component", "outbox-relay")}, nil
}

// heldBackRetry is how soon Run looks again at rows Flush had to hold back.
const heldBackRetry = 10 * time.Millisecond

// relayLockID is the advisory lock that elects the active relay of one
// database. Any constant works; each service has its own database.
const relayLockID = 0x6f7574626f78 // "outbox"

// Run publishes until ctx ends. It wakes on every committed Add (LISTEN/
// NOTIFY) and at least every PollInterval. Failures are logged and retried
// with backoff; Run returns only when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	listener := pq.NewListener(r.cfg.DatabaseURL, 10*time.Millisecond, 5*time.Second,
		func(ev pq.ListenerEventType, err error) {
			if err != nil {
				r.log.Warn("listen connection event", "event", ev, "err", err)
			}
		})
	defer listener.Close()
	if err := listener.Listen(Channel); err != nil {
		// Not fatal: the poll still publishes everything, only later.
		r.log.Warn("listen failed; relying on polling", "err", err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-listener.Notify: // nil after a reconnect: flush anyway
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}()

	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	failures := 0
	lastCleanup := time.Now()
	for {
		n, err := r.Flush(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			publishFailures.WithLabelValues(r.cfg.Name).Inc()
			delay := min(time.Duration(1<<min(failures, 6))*50*time.Millisecond, 3*time.Second)
			r.log.Error("publish failed; will retry", "err", err, "retry_in", delay)
			if !sleep(ctx, delay) {
				return nil
			}
			continue
		}
		failures = 0
		if n == r.cfg.BatchSize {
			continue // more is waiting
		}
		// Rows held back behind a transaction still running elsewhere
		// will be publishable in a moment; their NOTIFY has already been
		// delivered, so check again soon rather than wait for the poll.
		held, age, err := r.unsent(ctx)
		if err == nil {
			oldestUnsent.WithLabelValues(r.cfg.Name).Set(age)
		}
		if err == nil && held > 0 {
			if !sleep(ctx, heldBackRetry) {
				return nil
			}
			continue
		}
		if time.Since(lastCleanup) > r.cfg.PollInterval*30 {
			lastCleanup = time.Now()
			if err := r.cleanup(ctx); err != nil {
				r.log.Warn("cleanup of sent rows failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-ticker.C:
		}
	}
}

type row struct {
	ID      int64  `db:"id"`
	Topic   string `db:"topic"`
	Key     []byte `db:"key"`
	Value   []byte `db:"value"`
	Headers []byte `db:"headers"`
}

// Flush publishes one batch of unsent rows and marks them sent, returning how
// many it published. It returns 0 without error when another relay holds the
// lock.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	tx, err := r.cfg.DB.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	var leader bool
	if err := tx.GetContext(ctx, &leader, `SELECT pg_try_advisory_xact_lock($1)`, relayLockID); err != nil {
		return 0, fmt.Errorf("outbox: lock: %w", err)
	}
	if !leader {
		return 0, nil
	}
	var rows []row
	if err := tx.SelectContext(ctx, &rows, `
		SELECT id, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY txid, id
		LIMIT $1`, r.cfg.BatchSize); err != nil {
		return 0, fmt.Errorf("outbox: select unsent: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}

	msgs := make([]*sarama.ProducerMessage, len(rows))
	for i, rw := range rows {
		m, err := rw.message()
		if err != nil {
			return 0, err
		}
		msgs[i] = m
	}
	sent := make([]int64, 0, len(rows))
	pubErr := r.cfg.Publisher.SendMessages(msgs)
	var perr sarama.ProducerErrors
	switch {
	case pubErr == nil:
		for _, rw := range rows {
			sent = append(sent, rw.ID)
		}
	case errors.As(pubErr, &perr):
		// Mark what Kafka acknowledged, except a message whose key (order)
		// had an earlier message fail: it is published again after that
		// one, so one order's events never overtake each other.
		failed := make(map[*sarama.ProducerMessage]bool, len(perr))
		for _, e := range perr {
			failed[e.Msg] = true
		}
		blocked := map[string]bool{}
		for i, m := range msgs {
			key := string(rows[i].Key)
			if failed[m] || blocked[key] {
				blocked[key] = true
				continue
			}
			sent = append(sent, rows[i].ID)
		}
	default:
		return 0, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
	}

	if len(sent) > 0 {
		if _, err := tx.ExecContext(ctx,
			`UPDATE outbox SET sent_at = now() WHERE id = ANY($1)`, pq.Array(sent)); err != nil {
			return 0, fmt.Errorf("outbox: mark sent: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: commit: %w", err)
	}
	published.WithLabelValues(r.cfg.Name).Add(float64(len(sent)))
	r.log.Debug("published", "count", len(sent), "first_id", rows[0].ID)
	if pubErr != nil {
		return len(sent), fmt.Errorf("outbox: %d of %d messages failed: %w", len(rows)-len(sent), len(rows), pubErr)
	}
	return len(sent), nil
}

func (rw row) message() (*sarama.ProducerMessage, error) {
	var headers map[string]string
	if err := json.Unmarshal(rw.Headers, &headers); err != nil {
		return nil, fmt.Errorf("outbox: row %d headers: %w", rw.ID, err)
	}
	m := &sarama.ProducerMessage{
		Topic:    rw.Topic,
		Value:    sarama.ByteEncoder(rw.Value),
		Metadata: rw.ID,
	}
	if rw.Key != nil {
		m.Key = sarama.ByteEncoder(rw.Key)
	}
	for k, v := range headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return m, nil
}

// unsent counts the rows not yet marked sent, visible or held back, and
// returns the age in seconds of the oldest.
func (r *Relay) unsent(ctx context.Context) (n int, oldest float64, err error) {
	row := r.cfg.DB.QueryRowxContext(ctx, `
		SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM outbox WHERE sent_at IS NULL`)
	err = row.Scan(&n, &oldest)
	return n, oldest, err
}

func (r *Relay) cleanup(ctx context.Context) error {
	_, err := r.cfg.DB.ExecContext(ctx,
		`DELETE FROM outbox WHERE sent_at < now() - make_interval(secs => $1)`, r.cfg.Retention.Seconds())
	return err
}

// sleep waits d or until ctx ends, reporting whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
