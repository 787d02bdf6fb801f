package participant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
)

// TestHandlerSortsFailures: the chain tells the failures no retry can fix
// (dead-lettered) from those a retry may fix (the partition waits), and
// marks nothing processed for either.
func TestHandlerSortsFailures(t *testing.T) {
	db := testenv.DB(t)
	reactWith := func(err error) participant.Spec {
		return participant.Spec{
			Name:     "sorter",
			Produces: events.TopicShipping,
			Reactions: []participant.Reaction{
				participant.On(func(ctx context.Context, tx *participant.Tx, e events.Envelope, p events.InventoryReserved) error {
					return err
				}),
			},
		}
	}
	reserved := func() events.Envelope {
		return testenv.Event(t, uuid.NewString(), events.InventoryReserved{
			Items: []events.Item{{SKU: "s", Quantity: 1, UnitPrice: 1}}, ShippingAddress: events.Address{Country: "JP"},
		})
	}
	tests := []struct {
		name      string
		reaction  error
		message   func(m *sarama.ConsumerMessage)
		permanent bool
		ok        bool
	}{
		{"Applied", nil, nil, false, true},
		{"KeyIsNotTheOrderID", nil, func(m *sarama.ConsumerMessage) { m.Key = []byte("another-order") }, true, false},
		{"WrongTopicForTheType", nil, func(m *sarama.ConsumerMessage) { m.Topic = events.TopicPayment }, true, false},
		{"NotJSON", nil, func(m *sarama.ConsumerMessage) { m.Value = []byte("{not json") }, true, false},
		{"ReactionSaysInvalid", fmt.Errorf("check: %w", events.ErrInvalid), nil, true, false},
		{"DataExceptionSQLSTATE22", &pq.Error{Code: "22003", Message: "numeric value out of range"}, nil, true, false},
		{"UniqueViolationIsRetried", &pq.Error{Code: "23505", Message: "duplicate key"}, nil, false, false},
		{"LostConnectionIsRetried", errors.New("driver: bad connection"), nil, false, false},
		{"DeadlockIsRetried", &pq.Error{Code: "40P01", Message: "deadlock detected"}, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := reserved()
			m := testenv.Message(t, e)
			if tt.message != nil {
				tt.message(m)
			}
			err := reactWith(tt.reaction).Handler(db, testenv.Logger(t)).Handle(context.Background(), m)
			if (err == nil) != tt.ok || consumer.IsPermanent(err) != tt.permanent {
				t.Fatalf("err = %v (permanent %v), want ok=%v permanent=%v", err, consumer.IsPermanent(err), tt.ok, tt.permanent)
			}
			var marks int
			if err := db.Get(&marks, `SELECT count(*) FROM processed_events WHERE event_id = $1`, e.ID); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.ok]; marks != want {
				t.Errorf("%d processed_events marks, want %d", marks, want)
			}
		})
	}
}
