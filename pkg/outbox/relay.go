// This file is the relay's core, in the order it runs: lead, take the rows
// below pg_snapshot_xmin in (txid, id) order, publish them with acks=all,
// mark what Kafka acknowledged, then wait to be woken. Read it first. Each
// optimisation sits in a file named for what it adds, beside its test:
// leader.go, pace.go, notify.go, probe.go, suspect.go, unknowntopic.go,
// limits.go, refused.go.

package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/failpoint"
)

// Relay publishes outbox rows to Kafka, at least once and in (txid, id)
// order, and marks them sent. One relay per database leads (leader.go); the
// others stand by. No transaction stays open while Kafka is slow: each
// round selects, publishes, and marks in statements of their own.
type Relay struct {
	cfg     RelayConfig
	log     *slog.Logger
	leading atomic.Bool // whether conn holds the lock, for housekeeping

	mu           sync.Mutex           // serialises rounds; guards the fields below
	conn         *sqlx.Conn           // the leader's session, holding the lock, while non-nil
	awake        bool                 // conn holds relayAwakeID: Add does not notify (notify.go)
	blocked      blocked              // keys blocked after a failure (probe.go)
	unknownSince map[string]time.Time // when each topic became unknown (unknowntopic.go)
	// besideDebezium is when the relay last said it won't lead because
	// Debezium publishes (leader.go).
	besideDebezium time.Time
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
	leaderGauge.WithLabelValues(cfg.Name).Set(0)
	return &Relay{
		cfg:          cfg,
		log:          log,
		blocked:      blocked{keys: map[blockKey]struct{}{}, delay: probeFirst},
		unknownSince: map[string]time.Time{},
	}, nil
}

// Run publishes until ctx ends, then gives up the leadership. It runs a
// round on every NOTIFY (notify.go), at least every min(PollInterval,
// Lease/3), and sooner while rows wait (pace.go). Failures are logged and
// retried; Run does not wait for a publish in flight when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		r.Close()
	}()
	wake := r.listen(ctx, &wg)
	wg.Go(func() { r.housekeep(ctx) })

	// The leader's heartbeat and a standby's bid for the lock: a round at
	// least this often. Armed again as it fires, like a ticker.
	poll := r.cfg.Clock.NewTimer(r.tick())
	defer func() { poll.Stop() }()
	var p pace
	for {
		res, err := r.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		next := p.after(ctx, r, res, err)
		switch {
		case ctx.Err() != nil:
			return nil
		case next.now:
			continue
		case next.backoff > 0: // deaf to wake-ups: nothing moved
			if !sleep(ctx, r.cfg.Clock, next.backoff) {
				return nil
			}
		case !p.wait(ctx, r, wake, &poll, next.retryIn): // a NOTIFY, the poll, or retryIn
			return nil
		}
	}
}

// selectPublishable is the xmin rule: only rows whose transaction is older
// than every transaction still running, a set that can no longer grow, in
// the order they were written. A row that commits late is held back, never
// passed by. byteCapped (limits.go) bounds the bytes of one round.
var selectPublishable = byteCapped(`
		SELECT id, txid, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL AND refused_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY txid, id
		LIMIT $1`)

// round leads, or returns at once if another relay does; then it publishes
// one batch of the rows below xmin and marks what Kafka acknowledged.
func (r *Relay) round(ctx context.Context) (res roundResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	conn, err := r.lead(ctx)
	if err != nil || conn == nil {
		return res, err
	}
	res.leader = true
	defer func() {
		if err != nil && ctx.Err() == nil && r.conn != nil && r.heartbeat(ctx, r.conn) != nil {
			// Frozen past the Lease, or cut off: another relay may lead by
			// now. This one marked nothing meanwhile, and stands by.
			r.log.Warn("lost the leader connection during a round; resigning", "err", err)
			r.resign()
		}
	}()

	heads, err := r.probeHeads(ctx, conn) // the oldest row of each blocked key, when due
	if err != nil {
		return res, err
	}
	var rows []row
	limit := r.cfg.BatchSize - len(heads)
	if limit > 0 {
		query, args := r.publishable(limit) // selectPublishable, less blocked keys
		if err := conn.SelectContext(ctx, &rows, query, args...); err != nil {
			return res, fmt.Errorf("outbox: select unsent: %w", err)
		}
	}
	res.full = len(rows) > 0 && rows[0].Found == limit // more may wait
	rows = append(heads, rows...)
	if len(rows) > 0 {
		out, err := r.publish(ctx, conn, rows)
		res.published, res.refused = out.sent, out.refused
		r.updateBlocked(out, heads)
		if err != nil {
			res.probeIn = r.probeIn()
			return res, err
		}
		if res.published > 0 {
			r.hit(failpoint.BetweenBatches)
		}
	}
	res.probeIn = r.probeIn()
	if !res.full {
		res.heldBack, err = heldBack(ctx, conn) // rows behind a running transaction (pace.go)
	}
	return res, err
}

// publish sends rows to Kafka and marks what Kafka acknowledged; the rows
// it refused are sorted (suspect.go). It returns an error when some rows
// failed for a reason that may pass, or the whole batch failed.
func (r *Relay) publish(ctx context.Context, conn *sqlx.Conn, rows []row) (out publishOutcome, err error) {
	byID := make(map[int64]row, len(rows))
	msgs := make([]*sarama.ProducerMessage, 0, len(rows))
	for _, rw := range rows {
		m, err := rw.message()
		if err != nil { // it can never be published
			if err := r.refuse(ctx, conn, rw, err); err != nil {
				return out, err
			}
			out.refused++
			continue
		}
		byID[rw.ID] = rw
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		out.judged = true
		return out, nil
	}

	pubErr := r.send(ctx, conn, msgs) // leader.go: keeps the lease meanwhile
	failed, ok := r.failedRows(ctx, pubErr, msgs, byID)
	if !ok { // the batch failed as a whole: mark none, all go again
		return out, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
	}
	var acked []int64
	for _, m := range msgs {
		if _, ok := failed[m.Metadata.(int64)]; !ok {
			acked = append(acked, m.Metadata.(int64))
		}
	}
	if err := r.markSent(ctx, conn, acked); err != nil {
		return out, err
	}
	out.sent = len(acked)
	if len(failed) == 0 {
		out.judged = true
		return out, nil
	}
	return r.sortFailures(ctx, conn, out, pubErr, byID, len(rows))
}

// markSent records that Kafka acknowledged ids. It runs on the leader's
// connection only, so a relay whose session died never marks, and even if
// ctx has just ended: forgetting would only publish the rows once more.
func (r *Relay) markSent(ctx context.Context, conn *sqlx.Conn, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	r.hit(failpoint.AfterPublish)
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

// PublishOnce runs one round, as Run does on its own, and returns how many
// rows it published; 0, without error, when another relay leads. It leads
// from its first call until Close, the end of Run, the loss of its
// connection, or a pause longer than the Lease. Rows Kafka will never
// accept are refused, not reported; an error means some rows failed and
// will be retried. If ctx ends before Kafka answers, it returns at once,
// and the batch goes out again later.
func (r *Relay) PublishOnce(ctx context.Context) (int, error) {
	res, err := r.round(ctx)
	return res.published, err
}

// roundResult tells Run what a round did, and so when to run the next.
type roundResult struct {
	leader    bool
	full      bool // the batch was full: more rows may be waiting
	published int  // rows Kafka acknowledged and marked sent
	refused   int  // rows set aside for good
	heldBack  bool // committed rows waiting behind a running transaction
	// probeIn is how long until the rows of blocked keys are retried: 0
	// when no key is blocked, negative when the retry is due now.
	probeIn time.Duration
}

type row struct {
	ID      int64  `db:"id"`
	Topic   string `db:"topic"`
	Key     []byte `db:"key"`
	Value   []byte `db:"value"`
	Headers []byte `db:"headers"`
	Found   int    `db:"found"` // rows the query found before the byte cap; 0 for probes
}

// publishOutcome is what became of a batch.
type publishOutcome struct {
	sent, refused int
	// judged: every row was sent, refused, or is in failed. Otherwise the
	// batch failed as a whole (Kafka unreachable, the connection lost).
	judged bool
	failed []row // failed for a reason that may pass
}

// message is rw as Kafka takes it, or an error if it never can (refused.go).
func (rw row) message() (*sarama.ProducerMessage, error) {
	if !legalTopic(rw.Topic) {
		return nil, fmt.Errorf("outbox: row %d: %q is not a legal Kafka topic name", rw.ID, rw.Topic)
	}
	var headers map[string]string
	if err := json.Unmarshal(rw.Headers, &headers); err != nil {
		return nil, fmt.Errorf("outbox: row %d headers: %w", rw.ID, err)
	}
	m := &sarama.ProducerMessage{Topic: rw.Topic, Value: sarama.ByteEncoder(rw.Value), Metadata: rw.ID}
	if rw.Key != nil {
		m.Key = sarama.ByteEncoder(rw.Key)
	}
	for k, v := range headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return m, nil
}

// hit runs the failpoint name (the chaos suite arms them), then the tests'
// observer.
func (r *Relay) hit(name string) {
	failpoint.Hit(name)
	observe(r, name)
}

// observe lets the tests see what the relay does (export_test.go); a no-op
// in production.
var observe = func(r *Relay, event string) {}
