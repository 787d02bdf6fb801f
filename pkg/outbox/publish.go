// This file holds one round of the relay: selecting the publishable rows,
// publishing them to Kafka as a batch, marking what Kafka acknowledged, and
// parking what it will never accept — unknown topics after a grace period.

package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Publisher is the part of sarama.SyncProducer the relay needs. The producer
// must be configured with RequiredAcks = sarama.WaitForAll, so a message
// counts as published only once every in-sync replica has it.
type Publisher interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// unknownTopicGrace is how long a topic may stay unknown to Kafka before
// its rows are parked. At first an unknown topic is transient (being
// created, metadata catching up); after this it is a typo or a deleted
// topic, and retrying would only slow down every other row.
const unknownTopicGrace = 5 * time.Minute

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
			now := r.cfg.Clock.Now()
			since, ok := r.unknownSince[topic]
			if !ok {
				r.unknownSince[topic] = now
				since = now
			}
			if now.Sub(since) >= unknownTopicGrace {
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
