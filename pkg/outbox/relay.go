package outbox

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Publisher is the part of sarama.SyncProducer the relay needs. The producer
// must be configured with RequiredAcks = sarama.WaitForAll, so a message
// counts as published only once every in-sync replica has it.
type Publisher interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// Metrics, labelled by the relay's Name: the oldest unsent row's age is the
// one to alert on — it grows while Kafka is unreachable, and events wait —
// and so is any increase of the parked count, since a parked row waits for
// a human.
var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_published_total",
		Help: "Outbox rows published to Kafka and marked sent.",
	}, []string{"relay"})
	publishFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_publish_failures_total",
		Help: "Relay rounds that failed and will be retried.",
	}, []string{"relay"})
	parked = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_parked_total",
		Help: "Outbox rows Kafka will never accept, set aside for inspection instead of being retried.",
	}, []string{"relay"})
	oldestUnsent = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_oldest_unsent_seconds",
		Help: "Age of the oldest outbox row neither published nor parked, 0 when none waits.",
	}, []string{"relay"})
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Name labels the relay's metrics and logs, e.g. the service name.
	Name string
	// DB is the service's database, holding the outbox table. The active
	// relay keeps one of its connections for as long as it leads.
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
	// missed, e.g. while the LISTEN connection was reconnecting, and how
	// soon a standby relay notices that the active one is gone. Default 2s.
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
// One relay per database publishes at a time. It is elected by a
// session-level advisory lock, held on a connection of its own for as long
// as it leads; the other replicas stand by and take over within a
// PollInterval (sooner on a NOTIFY) once the leader's session ends. The lock
// lives in the session, not in a transaction, so no transaction stays open
// while Kafka is slow or down: each round selects a batch, publishes it, and
// marks what Kafka acknowledged in a short statement of its own. (A session
// lock needs a real session: connect directly or through a session-pooling
// proxy, not a transaction-pooling one.)
//
// Guarantees:
//   - at least once: a row is marked sent only after Kafka acknowledged it;
//     a crash or a lost connection in between publishes it again, and
//     consumers drop the duplicate by event id. The same holds for the one
//     round a leader whose session died may still finish while its
//     successor starts;
//   - no skipped rows: a round reads only rows whose writing transaction is
//     older than every transaction still running (txid below the snapshot's
//     xmin), so a row that commits late, after a higher id was already
//     visible, is held back rather than overtaken, and never passed by;
//   - order: rows go out in (txid, id) order, and the producer is idempotent
//     with one request in flight (package broker), so Kafka keeps each
//     partition's messages — one order's events share a key, hence a
//     partition — in the order sent, retries included. A non-retriable
//     failure of one row leaves later rows of that order published ahead of
//     it; consumers are built to tolerate that (terminal states, tombstones);
//   - nothing stalls behind a poison row: a row Kafka will never accept (too
//     large, invalid, for an invalid topic, or for a topic that has stayed
//     unknown for five minutes) is parked — parked_at and last_error
//     are set, it is logged at ERROR and counted in
//     choreo_outbox_parked_total — and kept, unpublished, until an operator
//     releases it (UPDATE outbox SET parked_at = NULL WHERE id = ...). Other
//     failures are retried with backoff, but never after a round that made
//     progress.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger

	// Tunables, fields rather than constants so that tests can shorten them.
	unknownTopicGrace time.Duration
	gaugeEvery        time.Duration

	leading   atomic.Bool  // whether conn holds the lock, for housekeeping
	listening atomic.Bool  // whether LISTEN is active, for tests
	rounds    atomic.Int64 // rounds run, for tests
	retries   atomic.Int64 // rounds started by the held-back retry timer, for tests

	mu           sync.Mutex // serialises rounds; guards the fields below
	conn         *sqlx.Conn // holds the leader lock while non-nil
	unknownSince map[string]time.Time
}

// NewRelay returns a Relay, or an error if cfg is incomplete.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "outbox-relay")
	if cfg.Name != "" {
		log = log.With("relay", cfg.Name)
	}
	return &Relay{
		cfg:               cfg,
		log:               log,
		unknownTopicGrace: unknownTopicGrace,
		gaugeEvery:        time.Second,
		unknownSince:      map[string]time.Time{},
	}, nil
}

const (
	// heldBackRetry is how soon Run first looks again at rows a round had
	// to hold back; the wait doubles, up to PollInterval, while they stay.
	heldBackRetry = 10 * time.Millisecond

	// unknownTopicGrace is how long a topic may stay unknown to Kafka before
	// its rows are parked. At first an unknown topic is transient (being
	// created, metadata catching up); after this it is a typo or a deleted
	// topic, and retrying would only slow down every other row.
	unknownTopicGrace = 5 * time.Minute

	// statementTimeout bounds the relay's own short statements.
	statementTimeout = 10 * time.Second
)

// relayLockID is the advisory lock that elects the active relay. It is
// combined with the outbox table's oid, so that relays of two outbox tables
// in one database (tests give each its own schema) do not exclude each
// other, while every replica of a service agrees on the key.
const relayLockID = 0x6f7574626f78 // "outbox"

// Run publishes until ctx ends. It wakes on every committed Add (LISTEN/
// NOTIFY) and at least every PollInterval; while it leads, it also wakes to
// retry rows held back behind a running transaction. Failures are logged and
// retried with backoff; Run returns only when ctx ends — promptly, even if a
// publish is still in flight (its rows are published again by the next
// leader) — and gives up the leadership on its way out.
func (r *Relay) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		r.mu.Lock()
		r.resign()
		r.mu.Unlock()
	}()

	wake := r.listen(ctx, &wg)
	wg.Go(func() { r.housekeep(ctx) })

	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	failures := 0
	heldDelay := heldBackRetry
	for {
		res, err := r.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		progress := res.published+res.parked > 0
		if err != nil {
			publishFailures.WithLabelValues(r.cfg.Name).Inc()
			if !progress {
				failures++
				delay := min(time.Duration(1<<min(failures, 6))*50*time.Millisecond, 3*time.Second)
				r.log.Error("publish failed; will retry", "err", err, "retry_in", delay)
				if !sleep(ctx, delay) {
					return nil
				}
				continue
			}
			// Some rows got out: the failing ones must not slow down the
			// rest, so go on at once; a round with no progress backs off.
			r.log.Warn("publish partly failed; continuing", "err", err,
				"published", res.published, "parked", res.parked)
		}
		failures = 0
		if progress && (err != nil || res.selected == r.cfg.BatchSize) {
			continue // more is waiting
		}

		// Rows held back behind a transaction still running elsewhere in
		// the cluster become publishable when it ends, which sends no
		// NOTIFY: look again soon, then less and less often.
		var retry *time.Timer
		var retryC <-chan time.Time
		if res.heldBack {
			if progress {
				heldDelay = heldBackRetry // back off only while nothing moves
			}
			retry = time.NewTimer(heldDelay)
			retryC = retry.C
			heldDelay = min(heldDelay*2, r.cfg.PollInterval)
		} else {
			heldDelay = heldBackRetry
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-ticker.C:
		case <-retryC:
			r.retries.Add(1)
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// listen starts LISTEN on its own connection and returns the channel it
// signals on every notification. pq.Listener.Listen blocks until it has a
// connection, which may be never while the database is unreachable, so it
// runs apart: polling keeps publishing meanwhile.
func (r *Relay) listen(ctx context.Context, wg *sync.WaitGroup) <-chan struct{} {
	wake := make(chan struct{}, 1)
	listener := pq.NewListener(r.cfg.DatabaseURL, 10*time.Millisecond, 5*time.Second,
		func(ev pq.ListenerEventType, err error) {
			if err != nil {
				r.log.Warn("listen connection event", "event", ev, "err", err)
			}
		})
	wg.Go(func() {
		if err := listener.Listen(Channel); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("listen failed; relying on polling", "err", err)
			}
			return
		}
		r.listening.Store(true)
	})
	wg.Go(func() {
		defer listener.Close() // also ends a Listen still waiting to connect
		defer r.listening.Store(false)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-listener.Notify: // nil after a reconnect: flush anyway
				if !ok {
					return
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	})
	return wake
}

// housekeep keeps the backlog gauge current and, while this relay leads,
// deletes sent rows past Retention — each on its own clock, so that neither
// an outage (no successful round) nor a steady backlog (no idle round)
// stops them.
func (r *Relay) housekeep(ctx context.Context) {
	gauge := time.NewTicker(r.gaugeEvery)
	defer gauge.Stop()
	cleanup := time.NewTicker(r.cfg.PollInterval * 30)
	defer cleanup.Stop()
	r.updateGauge(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-gauge.C:
			r.updateGauge(ctx)
		case <-cleanup.C:
			if !r.leading.Load() {
				continue
			}
			if err := r.cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cleanup of sent rows failed", "err", err)
			}
		}
	}
}

func (r *Relay) updateGauge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var age float64
	err := r.cfg.DB.GetContext(ctx, &age, `
		SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
		FROM outbox WHERE sent_at IS NULL AND parked_at IS NULL`)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("backlog gauge not updated", "err", err)
		}
		return
	}
	oldestUnsent.WithLabelValues(r.cfg.Name).Set(age)
}

func (r *Relay) cleanup(ctx context.Context) error {
	_, err := r.cfg.DB.ExecContext(ctx,
		`DELETE FROM outbox WHERE sent_at < now() - make_interval(secs => $1)`, r.cfg.Retention.Seconds())
	return err
}

// Flush runs one round and returns how many rows it published. It returns 0
// without error when another relay leads. On first use it tries to become
// the leader, and stays leader until Close, the end of Run, or the loss of
// its connection. Rows Kafka will never accept are parked, not reported as
// an error; an error means some rows failed and will be retried. If ctx
// ends while Kafka has not answered, Flush returns without waiting and the
// batch is published again later.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	res, err := r.round(ctx)
	return res.published, err
}

// Close gives up the leadership that Flush took, so that another relay can
// take over at once. Run gives it up on its own when it returns.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resign()
	return nil
}

// roundResult tells Run what a round did, and so when to run the next.
type roundResult struct {
	leader    bool
	selected  int  // publishable rows read
	published int  // rows Kafka acknowledged and marked sent
	parked    int  // rows set aside for good
	heldBack  bool // committed rows waiting behind a running transaction
}

type row struct {
	ID      int64  `db:"id"`
	Topic   string `db:"topic"`
	Key     []byte `db:"key"`
	Value   []byte `db:"value"`
	Headers []byte `db:"headers"`
}

func (r *Relay) round(ctx context.Context) (res roundResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds.Add(1)

	conn, err := r.lead(ctx)
	if err != nil || conn == nil {
		return res, err
	}
	res.leader = true

	var rows []row
	if err := conn.SelectContext(ctx, &rows, `
		SELECT id, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL AND parked_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY txid, id
		LIMIT $1`, r.cfg.BatchSize); err != nil {
		return res, fmt.Errorf("outbox: select unsent: %w", err)
	}
	res.selected = len(rows)
	if len(rows) > 0 {
		res.published, res.parked, err = r.publish(ctx, conn, rows)
		if err != nil {
			return res, err
		}
	}
	if len(rows) < r.cfg.BatchSize {
		if err := conn.GetContext(ctx, &res.heldBack, `
			SELECT EXISTS (
				SELECT 1 FROM outbox
				WHERE sent_at IS NULL AND parked_at IS NULL
				  AND txid >= pg_snapshot_xmin(pg_current_snapshot()))`); err != nil {
			return res, fmt.Errorf("outbox: look for held-back rows: %w", err)
		}
	}
	return res, nil
}

// lead returns the leader's connection, electing this relay if no other
// leads, or nil if another does. A leader checks its connection every round:
// if it died, so did the lock, and another relay may already lead.
func (r *Relay) lead(ctx context.Context) (*sqlx.Conn, error) {
	if r.conn != nil {
		pctx, cancel := context.WithTimeout(ctx, statementTimeout)
		err := r.conn.PingContext(pctx)
		cancel()
		if err == nil {
			return r.conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.log.Warn("lost the leader connection; electing again", "err", err)
		r.resign()
	}
	conn, err := r.cfg.DB.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: connect: %w", err)
	}
	var won bool
	if err := conn.GetContext(ctx, &won,
		`SELECT pg_try_advisory_lock($1 # 'outbox'::regclass::oid::bigint)`, relayLockID); err != nil {
		discard(conn) // it may hold the lock after all
		return nil, fmt.Errorf("outbox: elect: %w", err)
	}
	if !won {
		conn.Close()
		return nil, nil
	}
	r.conn = conn
	r.leading.Store(true)
	r.log.Info("elected the active relay")
	return conn, nil
}

// resign gives up the leadership, if held, by ending the session: the
// server then releases the lock, and no pooled connection ever carries it.
func (r *Relay) resign() {
	if r.conn == nil {
		return
	}
	discard(r.conn)
	r.conn = nil
	r.leading.Store(false)
	clear(r.unknownSince)
	r.log.Info("resigned as the active relay")
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sqlx.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // ErrBadConn is the point
	conn.Close()
}

// publish sends rows to Kafka, marks what Kafka acknowledged, and parks what
// it will never accept. It returns an error when some rows failed for a
// reason that may pass, or the whole batch failed; those stay unsent.
func (r *Relay) publish(ctx context.Context, conn *sqlx.Conn, rows []row) (sent, nparked int, err error) {
	byID := make(map[int64]row, len(rows))
	msgs := make([]*sarama.ProducerMessage, 0, len(rows))
	for _, rw := range rows {
		m, err := rw.message()
		if err != nil {
			if err := r.park(ctx, conn, rw, err); err != nil {
				return 0, nparked, err
			}
			nparked++
			continue
		}
		byID[rw.ID] = rw
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return 0, nparked, nil
	}

	pubErr := r.send(ctx, msgs)
	var perr sarama.ProducerErrors
	if pubErr != nil && !errors.As(pubErr, &perr) {
		return 0, nparked, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
	}
	failed := make(map[int64]error, len(perr))
	for _, e := range perr {
		var id int64
		ok := e != nil && e.Msg != nil
		if ok {
			id, ok = e.Msg.Metadata.(int64)
		}
		if _, known := byID[id]; !ok || !known {
			// Which row failed is unknown, so mark none: all are
			// published again.
			return 0, nparked, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
		}
		failed[id] = e.Err
	}
	var acked []int64
	for _, m := range msgs {
		id := m.Metadata.(int64)
		if _, ok := failed[id]; !ok {
			acked = append(acked, id)
			delete(r.unknownSince, m.Topic)
		}
	}
	if err := r.markSent(ctx, conn, acked); err != nil {
		return 0, nparked, err
	}
	sent = len(acked)
	if len(failed) == 0 {
		return sent, nparked, nil
	}

	// Sort the failures: park what is hopeless; confirm what only may be
	// (a broker rejects a whole batch for one bad message) by sending it
	// alone; leave the rest for the next round.
	var suspects []row
	var transient sarama.ProducerErrors
	for _, e := range perr {
		rw := byID[e.Msg.Metadata.(int64)]
		switch r.classify(rw.Topic, e.Err) {
		case failHopeless:
			if err := r.park(ctx, conn, rw, e.Err); err != nil {
				return sent, nparked, err
			}
			nparked++
		case failSuspect:
			suspects = append(suspects, rw)
		default:
			transient = append(transient, e)
		}
	}
	for i, rw := range suspects {
		m, _ := rw.message() // it encoded a moment ago
		err := r.send(ctx, []*sarama.ProducerMessage{m})
		var alone sarama.ProducerErrors
		switch {
		case err == nil:
			if err := r.markSent(ctx, conn, []int64{rw.ID}); err != nil {
				return sent, nparked, err
			}
			sent++
			continue
		case errors.As(err, &alone) && len(alone) == 1 && r.classify(rw.Topic, alone[0].Err) == failSuspect:
			if err := r.park(ctx, conn, rw, alone[0].Err); err != nil {
				return sent, nparked, err
			}
			nparked++
			continue
		}
		// Kafka is failing in other ways: try again next round.
		for _, rest := range suspects[i:] {
			transient = append(transient, &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: rest.Topic, Metadata: rest.ID}, Err: err})
		}
		break
	}
	if len(transient) == 0 {
		return sent, nparked, nil
	}
	return sent, nparked, fmt.Errorf("outbox: %d of %d messages failed: %w", len(transient), len(rows), transient)
}

// send publishes msgs, or gives up waiting when ctx ends, so that a relay
// asked to stop is not held for as long as the producer keeps retrying. Rows
// of an abandoned send are not marked and so are published again.
func (r *Relay) send(ctx context.Context, msgs []*sarama.ProducerMessage) error {
	done := make(chan error, 1)
	go func() { done <- r.cfg.Publisher.SendMessages(msgs) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// markSent records that Kafka acknowledged ids. It runs even if ctx has just
// ended: forgetting would only mean publishing the rows once more.
func (r *Relay) markSent(ctx context.Context, conn *sqlx.Conn, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx,
		`UPDATE outbox SET sent_at = now() WHERE id = ANY($1) AND sent_at IS NULL`, pq.Array(ids)); err != nil {
		return fmt.Errorf("outbox: mark %d rows sent: %w", len(ids), err)
	}
	published.WithLabelValues(r.cfg.Name).Add(float64(len(ids)))
	r.log.Debug("published", "count", len(ids), "first_id", ids[0])
	return nil
}

// park sets rw aside for good, with the reason, and says so loudly.
func (r *Relay) park(ctx context.Context, conn *sqlx.Conn, rw row, cause error) error {
	reason, _ := cleanText(cause.Error())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statementTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx,
		`UPDATE outbox SET parked_at = now(), last_error = $2 WHERE id = $1 AND sent_at IS NULL`,
		rw.ID, reason); err != nil {
		return fmt.Errorf("outbox: park row %d: %w", rw.ID, err)
	}
	parked.WithLabelValues(r.cfg.Name).Inc()
	var headers map[string]any
	_ = json.Unmarshal(rw.Headers, &headers) // best effort, for the log only
	eventID, _ := headers[events.HeaderEventID].(string)
	r.log.Error("outbox row parked: Kafka will never accept it; fix it and set parked_at to NULL to retry",
		"row_id", rw.ID, "topic", rw.Topic, "event_id", eventID, "err", cause)
	return nil
}

// failure is what a producer error means for the row that got it.
type failure int

const (
	failTransient failure = iota // may pass: retry next round
	failSuspect                  // the row, or another in its batch, is unacceptable: send it alone to know
	failHopeless                 // the row will never be accepted: park it
)

// classify sorts a producer error. Kafka reports size and validity per
// partition batch, so those errors only make a row a suspect. A topic name
// Kafka rejects is hopeless, as is a topic that has stayed unknown for
// unknownTopicGrace. Everything else — leadership changes, timeouts, an
// unreachable cluster, authorisation that an operator may still grant — is
// retried.
func (r *Relay) classify(topic string, err error) failure {
	var kerr sarama.KError
	var encErr sarama.PacketEncodingError
	var cfgErr sarama.ConfigurationError
	switch {
	case errors.As(err, &kerr):
		switch kerr {
		case sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidMessage,
			sarama.ErrMessageSetSizeTooLarge, sarama.ErrInvalidRecord:
			return failSuspect
		case sarama.ErrInvalidTopic:
			return failHopeless
		case sarama.ErrUnknownTopicOrPartition:
			since, ok := r.unknownSince[topic]
			if !ok {
				r.unknownSince[topic] = time.Now()
				since = time.Now()
			}
			if time.Since(since) >= r.unknownTopicGrace {
				return failHopeless
			}
		}
	case errors.As(err, &encErr):
		return failSuspect
	case errors.As(err, &cfgErr):
		// sarama checks each message's size against its configuration
		// before sending; other configuration errors concern every message
		// and need a fixed configuration, not parked rows.
		if strings.Contains(string(cfgErr), "MaxMessageBytes") {
			return failSuspect
		}
	}
	return failTransient
}

// legalTopic is Kafka's rule for topic names. A row naming any other topic
// can never be published, whatever the broker answers (brokers and fakes
// differ), so it is parked before it is sent.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (rw row) message() (*sarama.ProducerMessage, error) {
	if !legalTopic.MatchString(rw.Topic) || rw.Topic == "." || rw.Topic == ".." {
		return nil, fmt.Errorf("outbox: row %d: %q is not a legal Kafka topic name", rw.ID, rw.Topic)
	}
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
