package events_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

func mustEncode(t *testing.T, p events.Payload) []byte {
	t.Helper()
	e, err := events.New("test", "order-1", p, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	in := events.OrderCreated{
		CustomerID: "c-1", Currency: "JPY", TotalAmount: 5000,
		Items:           []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
		ShippingAddress: events.Address{Country: "JP"},
	}
	e, err := events.Decode(mustEncode(t, in))
	if err != nil {
		t.Fatal(err)
	}
	var out events.OrderCreated
	if err := e.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if e.Type != events.TypeOrderCreated || e.OrderID != "order-1" || out.TotalAmount != 5000 || out.Items[0].SKU != "SKU-1" {
		t.Fatalf("round trip lost data: %+v %+v", e, out)
	}
}

func TestNewRejectsInvalidPayload(t *testing.T) {
	if _, err := events.New("test", "o", events.PaymentRefunded{Reason: "because"}, time.Now()); err == nil {
		t.Fatal("want an error for an unknown refund reason")
	}
}

func TestDecodePoison(t *testing.T) {
	valid := string(mustEncode(t, events.ShipmentScheduled{Country: "JP"}))
	tests := []struct {
		name  string
		value string
		want  error
	}{
		{"NotJSON", "not json", events.ErrMalformed},
		{"Empty", "", events.ErrMalformed},
		{"UnknownEnvelopeField", strings.Replace(valid, `{"id"`, `{"extra":1,"id"`, 1), events.ErrMalformed},
		{"IDNotUUID", `{"id":"x","type":"ShipmentScheduled","order_id":"o","payload":{"country":"JP"}}`, events.ErrMalformed},
		{"NoOrderID", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","payload":{"country":"JP"}}`, events.ErrMalformed},
		{"UnknownType", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"OrderTeleported","order_id":"o","payload":{}}`, events.ErrUnknownType},
		{"PayloadFailsValidation", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o","payload":{"country":"JAPAN"}}`, events.ErrInvalid},
		{"PayloadUnknownField", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o","payload":{"country":"JP","x":1}}`, events.ErrInvalid},
		{"PayloadWrongShape", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"OrderCreated","order_id":"o","payload":[1,2]}`, events.ErrInvalid},
		{"Oversize", `{"id":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}`, events.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := events.Decode([]byte(tt.value))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeRejectsMismatchedPayloadType(t *testing.T) {
	e, err := events.Decode(mustEncode(t, events.ShipmentScheduled{Country: "JP"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Decode(&events.ShipmentFailed{}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}
