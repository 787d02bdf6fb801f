package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
)

// shipped is a valid ShipmentScheduled for a fresh order, and the message
// the shipping service's relay would publish for it.
func shipped(t *testing.T) (events.Envelope, *sarama.ConsumerMessage) {
	t.Helper()
	e, err := events.New("test", "ord-"+uuid.NewString(), events.ShipmentScheduled{Country: "JP"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return e, &sarama.ConsumerMessage{Topic: events.TopicShipping, Key: []byte(e.OrderID), Value: v}
}

// TestHandlerSortsFailures checks which failures Handler dead-letters
// (permanent) and which it has the consumer retry: a message that cannot be
// right however often it is delivered is permanent, a failure of the
// moment is not.
func TestHandlerSortsFailures(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	var runs int
	route := func(context.Context, *sqlx.Tx, events.Envelope) error { runs++; return nil }
	handler := func(r idem.Route) *idem.Handler {
		return &idem.Handler{
			DB: db, Consumer: "c-" + uuid.NewString(), Logger: testenv.Logger(t),
			Routes: map[string]idem.Route{events.TypeShipmentScheduled: r},
		}
	}

	t.Run("WellFormedIsApplied", func(t *testing.T) {
		runs = 0
		h := handler(route)
		_, m := shipped(t)
		for range 2 {
			if err := h.Handle(ctx, m); err != nil {
				t.Fatalf("Handle = %v, want nil", err)
			}
		}
		if runs != 1 {
			t.Fatalf("route ran %d times, want 1", runs)
		}
	})

	permanent := []struct {
		name   string
		change func(m *sarama.ConsumerMessage)
		route  idem.Route
	}{
		{"KeyIsNotTheOrderID", func(m *sarama.ConsumerMessage) { m.Key = []byte("another-order") }, route},
		{"NoKey", func(m *sarama.ConsumerMessage) { m.Key = nil }, route},
		{"TypeOnAnotherServicesTopic", func(m *sarama.ConsumerMessage) { m.Topic = events.TopicPayment }, route},
		{"UnknownTopic", func(m *sarama.ConsumerMessage) { m.Topic = "shipping.events.v2" }, route},
		// A value PostgreSQL cannot compute: retrying computes it again.
		{"DataExceptionFromRoute", nil, func(ctx context.Context, tx *sqlx.Tx, _ events.Envelope) error {
			runs++
			var n int64
			return tx.GetContext(ctx, &n, `SELECT 9223372036854775807::bigint + $1::bigint`, 1)
		}},
		{"InvalidTextRepresentationFromRoute", nil, func(ctx context.Context, tx *sqlx.Tx, _ events.Envelope) error {
			runs++
			_, err := tx.ExecContext(ctx, `SELECT $1::uuid`, "not-a-uuid")
			return err
		}},
	}
	for _, tt := range permanent {
		t.Run(tt.name, func(t *testing.T) {
			runs = 0
			h := handler(tt.route)
			e, m := shipped(t)
			if tt.change != nil {
				tt.change(m)
			}
			err := h.Handle(ctx, m)
			if !consumer.IsPermanent(err) {
				t.Fatalf("Handle = %v, want a permanent error", err)
			}
			if tt.change != nil && runs != 0 {
				t.Fatalf("route ran %d times for a message it must never see", runs)
			}
			if got := countMarkers(t, db, h.Consumer, e.ID); got != 0 {
				t.Fatalf("markers = %d, want 0: a dead-lettered event was never applied", got)
			}
		})
	}

	t.Run("TransientErrorIsRetried", func(t *testing.T) {
		down := errors.New("connection refused")
		h := handler(func(context.Context, *sqlx.Tx, events.Envelope) error { return down })
		e, m := shipped(t)
		err := h.Handle(ctx, m)
		if err == nil || consumer.IsPermanent(err) || !errors.Is(err, down) {
			t.Fatalf("Handle = %v, want %v, not permanent", err, down)
		}
		if got := countMarkers(t, db, h.Consumer, e.ID); got != 0 {
			t.Fatalf("markers = %d, want 0 so the retry applies it", got)
		}
	})

	t.Run("ConstraintViolationIsNotADataException", func(t *testing.T) {
		// SQLSTATE class 23 (here a CHECK) is the database's last line of
		// defence for a business rule the code should have enforced; it is
		// not in class 22 and keeps being retried, loudly.
		h := handler(func(ctx context.Context, tx *sqlx.Tx, _ events.Envelope) error {
			_, err := tx.ExecContext(ctx, `CREATE TEMP TABLE t_check (n int CHECK (n > 0)) ON COMMIT DROP; INSERT INTO t_check VALUES (0)`)
			return err
		})
		_, m := shipped(t)
		if err := h.Handle(ctx, m); err == nil || consumer.IsPermanent(err) {
			t.Fatalf("Handle = %v, want a retryable error", err)
		}
	})
}
