package eventapi_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/eventapi"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

func envelope(id, typ, order, occurred string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"version":1,"order_id":%q,"source":"order","occurred_at":%q,"payload":{"anything":true}}`,
		id, typ, order, occurred)
}

func TestRead(t *testing.T) {
	id, order := uuid.NewString(), "o-1"
	const at = "2026-01-02T03:04:05.123456Z"
	tests := []struct {
		name     string
		key      string
		value    string
		wantType string // "" means unreadable
		reason   string
	}{
		{"KnownTypeIsRead", order, envelope(id, "OrderCreated", order, at), "OrderCreated", ""},
		{"UnknownTypeIsReadAsIs", order, envelope(id, "OrderCancelRequested", order, at), "OrderCancelRequested", ""},
		{"NewerPayloadVersionIsRead", order, `{"id":"` + id + `","type":"PaymentCompleted","version":99,"order_id":"o-1","source":"payment","occurred_at":"` + at + `","payload":"?"}`, "PaymentCompleted", ""},
		{"DeclineDetailIsItsReason", order, `{"id":"` + id + `","type":"PaymentDeclined","version":1,"order_id":"o-1","source":"payment","occurred_at":"` + at + `","payload":{"customer_id":"c","amount":1,"detail":"unknown_customer"}}`, "PaymentDeclined", "unknown_customer"},
		{"CancelledCarriesTheOrdersReason", order, `{"id":"` + id + `","type":"OrderCancelled","version":1,"order_id":"o-1","source":"order","occurred_at":"` + at + `","payload":{"reason":"out_of_stock"}}`, "OrderCancelled", "out_of_stock"},
		{"InvalidPayloadIsStillReadWithoutAReason", order, `{"id":"` + id + `","type":"OrderCancelled","version":1,"order_id":"o-1","source":"order","occurred_at":"` + at + `","payload":{"reason":42}}`, "OrderCancelled", ""},
		{"NotJSONIsUnreadable", order, "not json", "", ""},
		{"NonCanonicalIDIsUnreadable", order, envelope("ABC", "OrderCreated", order, at), "", ""},
		{"UnknownTypeWithBadIDIsUnreadable", order, envelope("nope", "OrderTeleported", order, at), "", ""},
		{"EmptyTypeIsUnreadable", order, envelope(id, "", order, at), "", ""},
		{"MissingOccurredAtIsUnreadable", order, `{"id":"` + id + `","type":"OrderCreated","order_id":"o-1","source":"order","payload":{}}`, "", ""},
		{"KeyOtherThanOrderIDIsUnreadable", "o-2", envelope(id, "OrderCreated", order, at), "", ""},
		{"EmptyOrderIDIsUnreadable", "", envelope(id, "OrderCreated", "", at), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &sarama.ConsumerMessage{Topic: "order.events", Partition: 2, Offset: 7, Key: []byte(tt.key), Value: []byte(tt.value)}
			e, err := eventapi.Read(m)
			if tt.wantType == "" {
				if !errors.Is(err, eventapi.ErrUnreadable) {
					t.Fatalf("Read = %+v, %v; want ErrUnreadable", e, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			want := domain.Event{EventID: id, OrderID: order, Type: tt.wantType, Service: e.Service, Topic: "order.events",
				Partition: 2, Offset: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Reason: tt.reason}
			if e != want {
				t.Fatalf("Read = %+v, want %+v", e, want)
			}
		})
	}
}

// recorder records in memory, or fails.
type recorder struct {
	got []domain.Event
	err error
	r   store.Recorded
}

func (r *recorder) Record(_ context.Context, e domain.Event) (store.Recorded, error) {
	r.got = append(r.got, e)
	return r.r, r.err
}

func TestHandler(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	good := &sarama.ConsumerMessage{Topic: "order.events", Key: []byte("o-1"),
		Value: []byte(envelope(uuid.NewString(), "OrderCompleted", "o-1", "2026-01-02T03:04:05Z"))}
	poison := &sarama.ConsumerMessage{Topic: "order.events", Key: []byte("o-1"), Value: []byte("not json")}
	ending := store.Recorded{New: true, Before: domain.Running, After: domain.Completed}
	tests := []struct {
		name       string
		msg        *sarama.ConsumerMessage
		rec        *recorder
		wantErr    bool
		wantRecord int
		wantEnded  int
	}{
		{"ReadableIsRecorded", good, &recorder{}, false, 1, 0},
		{"TheEndOfASagaIsReported", good, &recorder{r: ending}, false, 1, 1},
		{"UnreadableIsAcknowledgedNotRecorded", poison, &recorder{}, false, 0, 0},
		{"StoreFailureIsRetried", good, &recorder{err: errors.New("database away")}, true, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ended := 0
			h := eventapi.Handler("tracker", tt.rec, log, func(store.Recorded) { ended++ })
			err := h.Handle(context.Background(), tt.msg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Handle error = %v, want error %v", err, tt.wantErr)
			}
			if len(tt.rec.got) != tt.wantRecord || ended != tt.wantEnded {
				t.Fatalf("recorded %d, ended %d; want %d, %d", len(tt.rec.got), ended, tt.wantRecord, tt.wantEnded)
			}
		})
	}
}
