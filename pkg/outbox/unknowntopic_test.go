package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// TestUnknownTopicIsRefusedOnlyAfterGrace: a topic unknown to Kafka may be
// being created; its rows are retried for a while, then refused.
func TestUnknownTopicIsRefusedOnlyAfterGrace(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	gone := addRaw(t, db, outbox.Message{Topic: "gone", Value: []byte("{}")})
	add(t, db, "here", anyEvent(t))

	clock := newFakeClock()
	r := newRelay(t, db, failTopic("gone", sarama.ErrUnknownTopicOrPartition), func(c *outbox.RelayConfig) {
		c.Clock = clock
	})
	n, err := r.PublishOnce(ctx)
	if err == nil || n != 1 {
		t.Fatalf("first PublishOnce = %d, %v; want 1 and the unknown topic reported", n, err)
	}
	if ids := refusedRows(t, db); len(ids) != 0 {
		t.Fatalf("refused %v at once, want the row retried during the grace period", ids)
	}
	clock.Advance(outbox.UnknownTopicGrace - time.Second)
	if n, err := r.PublishOnce(ctx); err == nil || n != 0 {
		t.Fatalf("PublishOnce within the grace period = %d, %v; want 0 and the unknown topic reported", n, err)
	}
	if ids := refusedRows(t, db); len(ids) != 0 {
		t.Fatalf("refused %v within the grace period, want the row retried", ids)
	}
	clock.Advance(time.Second) // the grace is over, counted from the first failure
	if n, err := r.PublishOnce(ctx); err != nil || n != 0 {
		t.Fatalf("PublishOnce after the grace period = %d, %v; want 0, nil", n, err)
	}
	if ids := refusedRows(t, db); !equalIDs(ids, []int64{gone}) {
		t.Fatalf("refused rows = %v, want [%d]", ids, gone)
	}
}

// switchable fails every message with the error it is set to.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) set(err error) { s.err.Store(&err) }

func (s *switchable) SendMessages(msgs []*sarama.ProducerMessage) error {
	var errs sarama.ProducerErrors
	for _, m := range msgs {
		errs = append(errs, &sarama.ProducerError{Msg: m, Err: *s.err.Load()})
	}
	return errs
}

// TestUnknownTopicGraceNeedsContinuousUnknown: one unknown-topic error, a
// broker outage longer than the grace period, and one more unknown-topic
// error do not refuse the row: the outage interrupted the evidence. Unknown
// without interruption for the whole grace period does.
func TestUnknownTopicGraceNeedsContinuousUnknown(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	gone := addRaw(t, db, outbox.Message{Topic: "gone", Value: []byte("{}")})
	pub := &switchable{}
	clock := newFakeClock()
	r := newRelay(t, db, pub, func(c *outbox.RelayConfig) { c.Clock = clock })
	flush := func(what string) {
		t.Helper()
		if n, err := r.PublishOnce(ctx); err == nil || n != 0 {
			t.Fatalf("PublishOnce (%s) = %d, %v; want 0 and the failure reported", what, n, err)
		}
		if ids := refusedRows(t, db); len(ids) != 0 {
			t.Fatalf("refused %v after %s, want the row retried", ids, what)
		}
	}

	pub.set(sarama.ErrUnknownTopicOrPartition)
	flush("one unknown-topic error")
	pub.set(sarama.ErrOutOfBrokers)
	for elapsed := time.Duration(0); elapsed <= outbox.UnknownTopicGrace; elapsed += time.Minute {
		clock.Advance(time.Minute)
		flush(fmt.Sprintf("%v of broker outage", elapsed+time.Minute))
	}
	pub.set(sarama.ErrUnknownTopicOrPartition)
	clock.Advance(time.Minute) // the row's retry is due
	flush("an unknown-topic error after an outage longer than the grace period")

	// From here the topic stays unknown: refused once the grace is over.
	for elapsed := time.Minute; elapsed < outbox.UnknownTopicGrace; elapsed += time.Minute {
		clock.Advance(time.Minute)
		flush(fmt.Sprintf("%v of continuous unknown-topic errors", elapsed))
	}
	clock.Advance(time.Minute)
	if n, err := r.PublishOnce(ctx); err != nil || n != 0 {
		t.Fatalf("PublishOnce after the grace period = %d, %v; want 0, nil", n, err)
	}
	if ids := refusedRows(t, db); !equalIDs(ids, []int64{gone}) {
		t.Fatalf("refused rows = %v, want [%d] after %v of continuous unknown-topic errors", ids, gone, outbox.UnknownTopicGrace)
	}
}
