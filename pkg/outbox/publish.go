// This file holds one round of the relay: selecting the publishable rows
// (holding back the keys whose oldest row failed, retrying that row on a
// backoff), publishing them to Kafka as a batch, marking what Kafka
// acknowledged, and parking what it will never accept — unknown topics
// after a grace period of continuous unknown-topic errors.

package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/tracing"
)

// Publisher is the part of sarama.SyncProducer the relay needs. The producer
// must be configured with RequiredAcks = sarama.WaitForAll, so a message
// counts as published only once every in-sync replica has it.
type Publisher interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// unknownTopicGrace is how long a topic may stay unknown to Kafka, without
// interruption, before its rows are parked. At first an unknown topic is transient (being
// created, metadata catching up); after this it is a typo or a deleted
// topic, and retrying would only slow down every other row.
const unknownTopicGrace = 5 * time.Minute

// Flush runs one round and returns how many rows it published. It returns 0
// without error when another relay leads. On first use it tries to become
// the leader, and stays leader until Close, the end of Run, the loss of its
// connection, or a pause longer than the Lease between two calls. Rows
// Kafka will never accept are parked, not reported as an error; an error
// means some rows failed and will be retried. If ctx ends while Kafka has
// not answered, Flush returns without waiting and the batch is published
// again later.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	res, err := r.round(ctx)
	return res.published, err
}

// roundResult tells Run what a round did, and so when to run the next.
type roundResult struct {
	leader    bool
	full      bool // the batch was full: more rows may be waiting
	published int  // rows Kafka acknowledged and marked sent
	parked    int  // rows set aside for good
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
	// Found is how many rows the round's query found before the byte cap
	// (see byteCapped); 0 for the heads of blocked keys.
	Found int `db:"found"`
}

// blockKey is what a row that failed holds back: the later rows of its
// topic and key, which must not overtake it. An unkeyed row has no order to
// keep, and holds back only itself.
type blockKey struct {
	topic string
	key   string
	id    int64 // unkeyed rows only
}

func (rw row) blockKey() blockKey {
	if rw.Key == nil {
		return blockKey{topic: rw.Topic, id: rw.ID}
	}
	return blockKey{topic: rw.Topic, key: string(rw.Key)}
}

const (
	// probeFirst is how soon the oldest row of a newly blocked key is
	// retried; the wait doubles, up to probeMax, while retries fail.
	probeFirst = 250 * time.Millisecond
	probeMax   = 5 * time.Second
)

// maxBlocked caps the blocked keys. Past it — most of the backlog failing,
// as when the whole cluster is down — a failing row blocks nothing more,
// and Run backs off instead.
func (r *Relay) maxBlocked() int { return 16 * r.cfg.BatchSize }

var selectPublishable = byteCapped(`
		SELECT id, txid, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL AND parked_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY txid, id
		LIMIT $1`)

// selectUnblocked is selectPublishable without the rows of blocked keys.
var selectUnblocked = byteCapped(`
		SELECT id, txid, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL AND parked_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		  AND NOT (key IS NOT NULL AND (topic, key) IN (SELECT * FROM unnest($2::text[], $3::bytea[])))
		  AND id <> ALL($4::bigint[])
		ORDER BY txid, id
		LIMIT $1`)

// maxRoundBytes caps the bytes of values one round reads and publishes
// (always at least one row): a batch of BatchSize rows is a few hundred
// KiB of ordinary events, but a burst of dead letters of up to 512 KiB
// each would otherwise take half a GiB into the relay's memory at once.
const maxRoundBytes = 32 << 20

// byteCapped keeps, of the rows query selects (with txid), those whose
// values before them in the round's order stay under maxRoundBytes, and
// says in each row how many the query found, so the round knows whether
// more wait. PostgreSQL reads a long value's length without reading it.
func byteCapped(query string) string {
	return `
		SELECT id, topic, key, value, headers, found FROM (
			SELECT q.*, count(*) OVER () AS found,
			       sum(octet_length(q.value)) OVER (ORDER BY q.txid, q.id) - octet_length(q.value) AS before
			FROM (` + query + `) q
		) capped
		WHERE before < ` + strconv.Itoa(maxRoundBytes) + `
		ORDER BY txid, id`
}

// selectHeads reads the oldest publishable row of each blocked key.
const selectHeads = `
		SELECT id, topic, key, value, headers FROM (
			SELECT DISTINCT ON (topic, key, CASE WHEN key IS NULL THEN id END)
			       id, txid, topic, key, value, headers
			FROM outbox
			WHERE sent_at IS NULL AND parked_at IS NULL
			  AND txid < pg_snapshot_xmin(pg_current_snapshot())
			  AND ((key IS NOT NULL AND (topic, key) IN (SELECT * FROM unnest($2::text[], $3::bytea[])))
			       OR id = ANY($4::bigint[]))
			ORDER BY topic, key, CASE WHEN key IS NULL THEN id END, txid, id
		) heads
		ORDER BY txid, id
		LIMIT $1`

// blockedArgs returns the blocked keys as the query arguments $2 to $4.
func (r *Relay) blockedArgs() []any {
	// Empty, not nil: a nil slice is NULL, and id <> ALL(NULL) is never true.
	topics, keys, ids := []string{}, [][]byte{}, []int64{}
	for k := range r.blocked {
		if k.id != 0 {
			ids = append(ids, k.id)
			continue
		}
		topics = append(topics, k.topic)
		keys = append(keys, []byte(k.key))
	}
	return []any{pq.Array(topics), pq.Array(keys), pq.Array(ids)}
}

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
			// Frozen past the Lease, or cut off: another relay may lead
			// by now. Whatever this one published meanwhile is a
			// duplicate; it marked nothing, and stands by.
			r.log.Warn("lost the leader connection during a round; resigning", "err", err)
			r.resign()
		}
	}()

	// The oldest row of each blocked key is retried when due, alongside
	// the rows of every other key.
	limit := r.cfg.BatchSize
	var heads []row
	if len(r.blocked) > 0 && !r.cfg.Clock.Now().Before(r.probeAt) {
		n := max(1, limit/2)
		if err := conn.SelectContext(ctx, &heads, selectHeads, append([]any{n}, r.blockedArgs()...)...); err != nil {
			return res, fmt.Errorf("outbox: select rows of blocked keys: %w", err)
		}
		if len(heads) < n {
			// Every blocked key answered: those that did not have no
			// publishable row left (another leader sent it, or it was
			// parked) and block nothing.
			has := make(map[blockKey]bool, len(heads))
			for _, h := range heads {
				has[h.blockKey()] = true
			}
			for k := range r.blocked {
				if !has[k] {
					delete(r.blocked, k)
				}
			}
		}
		limit -= len(heads)
	}
	var rows []row
	if limit > 0 {
		query, args := selectPublishable, []any{limit}
		if len(r.blocked) > 0 {
			query, args = selectUnblocked, append(args, r.blockedArgs()...)
		}
		if err := conn.SelectContext(ctx, &rows, query, args...); err != nil {
			return res, fmt.Errorf("outbox: select unsent: %w", err)
		}
	}
	res.full = len(rows) > 0 && rows[0].Found == limit // more may wait
	probed := len(heads) > 0
	rows = append(heads, rows...)
	if len(rows) > 0 {
		out, err := r.publish(ctx, conn, rows)
		res.published, res.parked = out.sent, out.parked
		r.hold(out, heads, probed)
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

// hold updates the blocked keys after a batch: a key whose row failed for
// a reason that may pass is blocked, so that its later rows do not overtake
// that row while the rows of other keys flow; a blocked key whose oldest
// row got through (or was parked) is free again.
func (r *Relay) hold(out publishOutcome, heads []row, probed bool) {
	now := r.cfg.Clock.Now()
	failed := make(map[blockKey]bool, len(out.failed))
	for _, rw := range out.failed {
		failed[rw.blockKey()] = true
	}
	probeFailed := !out.judged
	if out.judged {
		for _, h := range heads {
			k := h.blockKey()
			if failed[k] {
				probeFailed = true
			} else {
				delete(r.blocked, k)
			}
		}
	}
	wasBlocked := len(r.blocked) > 0
	for k := range failed {
		if len(r.blocked) >= r.maxBlocked() {
			break
		}
		r.blocked[k] = struct{}{}
	}
	switch {
	case len(r.blocked) == 0:
		r.probeDelay = probeFirst
	case probed && probeFailed:
		r.probeDelay = min(r.probeDelay*2, probeMax)
		r.probeAt = now.Add(r.probeDelay)
	case probed:
		// Kafka takes the blocked keys' rows again: retry the others now.
		r.probeDelay = probeFirst
		r.probeAt = now
	case !wasBlocked:
		r.probeDelay = probeFirst
		r.probeAt = now.Add(r.probeDelay)
	}
}

// probeIn is roundResult.probeIn.
func (r *Relay) probeIn() time.Duration {
	if len(r.blocked) == 0 {
		return 0
	}
	if d := r.probeAt.Sub(r.cfg.Clock.Now()); d > 0 {
		return d
	}
	return -1
}

// publishOutcome is what became of a batch.
type publishOutcome struct {
	sent, parked int
	// judged: every row was sent, parked, or is in failed. Otherwise the
	// batch failed as a whole (Kafka unreachable in a way sarama does not
	// report per message, a lost connection, the relay stopping).
	judged bool
	failed []row // failed for a reason that may pass
}

// publish sends rows to Kafka, marks what Kafka acknowledged, and parks what
// it will never accept. It returns an error when some rows failed for a
// reason that may pass, or the whole batch failed; those stay unsent.
func (r *Relay) publish(ctx context.Context, conn *sqlx.Conn, rows []row) (out publishOutcome, err error) {
	byID := make(map[int64]row, len(rows))
	msgs := make([]*sarama.ProducerMessage, 0, len(rows))
	for _, rw := range rows {
		m, err := rw.message()
		if err != nil {
			if err := r.park(ctx, conn, rw, err); err != nil {
				return out, err
			}
			out.parked++
			continue
		}
		byID[rw.ID] = rw
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		out.judged = true
		return out, nil
	}

	pubErr := r.send(ctx, conn, msgs)
	var perr sarama.ProducerErrors
	if pubErr != nil && !errors.As(pubErr, &perr) {
		if ctx.Err() == nil && !errors.Is(pubErr, errLostLeadership) {
			// Kafka failed in another way than "unknown topic": that
			// interrupts every topic's unknown-topic grace clock.
			for _, m := range msgs {
				delete(r.unknownSince, m.Topic)
			}
		}
		return out, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
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
			return out, fmt.Errorf("outbox: publish %d messages: %w", len(msgs), pubErr)
		}
		failed[id] = e.Err
	}
	// The grace clock of a topic measures how long it has stayed unknown
	// without interruption: an acknowledged message shows the topic
	// exists, and any other error means Kafka could not tell (a broker
	// down, a leader moving), so either starts the clock afresh.
	var acked []int64
	for _, m := range msgs {
		id := m.Metadata.(int64)
		if err, ok := failed[id]; !ok || !unknownTopic(err) {
			delete(r.unknownSince, m.Topic)
		}
		if _, ok := failed[id]; !ok {
			acked = append(acked, id)
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

	// Sort the failures: park what is hopeless; confirm what only may be
	// (a broker rejects a whole batch for one bad message) by sending it
	// alone; leave the rest for a later round.
	var suspects []row
	var transient sarama.ProducerErrors
	for _, e := range perr {
		rw := byID[e.Msg.Metadata.(int64)]
		switch r.classify(rw.Topic, e.Err) {
		case failHopeless:
			if err := r.park(ctx, conn, rw, e.Err); err != nil {
				return out, err
			}
			out.parked++
		case failSuspect:
			suspects = append(suspects, rw)
		default:
			transient = append(transient, e)
			out.failed = append(out.failed, rw)
		}
	}
	for i, rw := range suspects {
		m, _ := rw.message() // it encoded a moment ago
		err := r.send(ctx, conn, []*sarama.ProducerMessage{m})
		var alone sarama.ProducerErrors
		switch {
		case err == nil:
			delete(r.unknownSince, rw.Topic)
			if err := r.markSent(ctx, conn, []int64{rw.ID}); err != nil {
				return out, err
			}
			out.sent++
			continue
		case errors.As(err, &alone) && len(alone) == 1 && r.classify(rw.Topic, alone[0].Err) == failSuspect:
			if err := r.park(ctx, conn, rw, alone[0].Err); err != nil {
				return out, err
			}
			out.parked++
			continue
		}
		// Kafka is failing in other ways: try again later.
		for _, rest := range suspects[i:] {
			transient = append(transient, &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: rest.Topic, Metadata: rest.ID}, Err: err})
			out.failed = append(out.failed, rest)
		}
		break
	}
	out.judged = true
	if len(transient) == 0 {
		return out, nil
	}
	return out, fmt.Errorf("outbox: %d of %d messages failed: %w", len(transient), len(rows), transient)
}

// unknownTopic reports whether err says that Kafka does not know the topic.
func unknownTopic(err error) bool {
	var kerr sarama.KError
	return errors.As(err, &kerr) && kerr == sarama.ErrUnknownTopicOrPartition
}

// send publishes msgs, or gives up waiting when ctx ends, so that a relay
// asked to stop is not held for as long as the producer keeps retrying. Rows
// of an abandoned send are not marked and so are published again. While
// Kafka takes its time, the leader's session is touched every Lease/3, so
// that the server does not end it as idle; if it has died, the relay no
// longer leads, and gives up waiting too.
func (r *Relay) send(ctx context.Context, conn *sqlx.Conn, msgs []*sarama.ProducerMessage) (err error) {
	spans := r.startPublishSpans(msgs)
	start := time.Now()
	defer func() {
		publishSeconds.WithLabelValues(r.cfg.Name).Observe(time.Since(start).Seconds())
		endPublishSpans(spans, err)
	}()
	done := make(chan error, 1)
	go func() { done <- r.cfg.Publisher.SendMessages(msgs) }()
	for {
		beat := r.cfg.Clock.NewTimer(r.heartbeatEvery())
		select {
		case err := <-done:
			beat.Stop()
			return err
		case <-ctx.Done():
			beat.Stop()
			return ctx.Err()
		case <-beat.C():
			if err := r.heartbeat(ctx, conn); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w while publishing: %w", errLostLeadership, err)
			}
		}
	}
}

// startPublishSpans starts one producer span per message whose row stored
// a trace context, as that context's child, and puts the span's own
// context in the message's headers: the consumer's span becomes its child,
// and the trace runs unbroken from the request through the outbox to the
// next service. Rows without a trace context get no span.
func (r *Relay) startPublishSpans(msgs []*sarama.ProducerMessage) map[*sarama.ProducerMessage]trace.Span {
	spans := make(map[*sarama.ProducerMessage]trace.Span, len(msgs))
	for _, m := range msgs {
		parent := tracing.ExtractProduced(context.Background(), m.Headers)
		if !trace.SpanContextFromContext(parent).IsValid() {
			continue
		}
		attrs := []attribute.KeyValue{
			tracing.AttrService.String(r.cfg.Name),
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", m.Topic),
		}
		for _, h := range m.Headers {
			switch string(h.Key) {
			case events.HeaderEventID:
				attrs = append(attrs, tracing.AttrEventID.String(string(h.Value)))
			case events.HeaderEventType:
				attrs = append(attrs, tracing.AttrEventType.String(string(h.Value)))
			}
		}
		if key, ok := m.Key.(sarama.ByteEncoder); ok {
			attrs = append(attrs, tracing.AttrOrderID.String(string(key)))
		}
		ctx, span := tracing.Tracer().Start(parent, "publish "+m.Topic,
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		m.Headers = tracing.InjectRecord(ctx, m.Headers)
		spans[m] = span
	}
	return spans
}

// endPublishSpans ends the spans of a send that returned err, marking the
// messages that failed.
func endPublishSpans(spans map[*sarama.ProducerMessage]trace.Span, err error) {
	if len(spans) == 0 {
		return
	}
	failed := map[*sarama.ProducerMessage]error{}
	var perr sarama.ProducerErrors
	if errors.As(err, &perr) {
		for _, e := range perr {
			if e != nil {
				failed[e.Msg] = e.Err
			}
		}
	}
	for m, span := range spans {
		switch ferr, ok := failed[m]; {
		case ok:
			span.RecordError(ferr)
			span.SetStatus(codes.Error, "not published")
		case err != nil && perr == nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, "not published")
		}
		span.End()
	}
}

// markSent records that Kafka acknowledged ids. It runs on the leader's
// connection only — if the relay was frozen past its Lease, that session
// is gone and the statement fails, so a relay that no longer leads never
// marks — and even if ctx has just ended: forgetting would only mean
// publishing the rows once more.
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
	r.log.Error("outbox row parked: Kafka will never accept it; fix the cause, then release it (choreoctl release-outbox)",
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
