// This file sorts the rows of a batch Kafka refused in part: it refuses
// what Kafka will never take, sends alone what may be another row's fault
// (a broker rejects a whole partition batch for one message too large), and
// leaves the rest for a later round.
// TestBatchRejectionRefusesOnlyTheOffendingRow and
// TestPartialFailureMarksExactlyWhatKafkaAcknowledged show why.

package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
)

// failedRows maps the rows that pubErr says failed, by id, to their
// errors, and keeps the unknown-topic grace clocks. It reports false when
// the batch failed as a whole, or an error names no row of byID.
func (r *Relay) failedRows(ctx context.Context, pubErr error, msgs []*sarama.ProducerMessage, byID map[int64]row) (map[int64]error, bool) {
	var perr sarama.ProducerErrors
	if pubErr != nil && !errors.As(pubErr, &perr) {
		r.interruptGrace(ctx, pubErr, msgs)
		return nil, false
	}
	failed := make(map[int64]error, len(perr))
	for _, e := range perr {
		var id int64
		ok := e != nil && e.Msg != nil
		if ok {
			id, ok = e.Msg.Metadata.(int64)
		}
		if _, known := byID[id]; !ok || !known {
			return nil, false
		}
		failed[id] = e.Err
	}
	r.restartGrace(msgs, failed)
	return failed, true
}

// failure is what a producer error means for the row that got it.
type failure int

const (
	failTransient failure = iota // may pass: retry next round
	failSuspect                  // the row, or another in its batch, is unacceptable: send it alone to know
	failHopeless                 // the row will never be accepted: refuse it
)

// classify sorts a producer error. Kafka reports size and validity per
// partition batch, so those errors only make a row a suspect. An invalid
// topic name is hopeless, as is a topic unknown for unknownTopicGrace.
// Everything else (leadership changes, timeouts, an unreachable cluster,
// authorisation an operator may still grant) is retried.
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
			if r.unknownTooLong(topic) {
				return failHopeless
			}
		}
	case errors.As(err, &encErr):
		return failSuspect
	case errors.As(err, &cfgErr):
		// sarama checks each message's size against its configuration
		// before sending; other configuration errors concern every message
		// and need a fixed configuration, not refused rows.
		if strings.Contains(string(cfgErr), "MaxMessageBytes") {
			return failSuspect
		}
	}
	return failTransient
}

// sortFailures refuses the rows pubErr says are hopeless, sends each suspect
// alone (refusing it if Kafka refuses it alone), and leaves the rest in
// out.failed, with an error, for a later round. total is the batch's size.
func (r *Relay) sortFailures(ctx context.Context, conn *sqlx.Conn, out publishOutcome, pubErr error, byID map[int64]row, total int) (publishOutcome, error) {
	var perr sarama.ProducerErrors
	errors.As(pubErr, &perr) // failedRows found each of them
	var suspects []row
	var transient sarama.ProducerErrors
	for _, e := range perr {
		rw := byID[e.Msg.Metadata.(int64)]
		switch r.classify(rw.Topic, e.Err) {
		case failHopeless:
			if err := r.refuse(ctx, conn, rw, e.Err); err != nil {
				return out, err
			}
			out.refused++
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
			delete(r.unknownSince, rw.Topic) // the topic exists
			if err := r.markSent(ctx, conn, []int64{rw.ID}); err != nil {
				return out, err
			}
			out.sent++
			continue
		case errors.As(err, &alone) && len(alone) == 1 && r.classify(rw.Topic, alone[0].Err) == failSuspect:
			if err := r.refuse(ctx, conn, rw, alone[0].Err); err != nil {
				return out, err
			}
			out.refused++
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
	return out, fmt.Errorf("outbox: %d of %d messages failed: %w", len(transient), total, transient)
}
