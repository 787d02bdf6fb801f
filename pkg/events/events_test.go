package events_test

import (
	"errors"
	"fmt"
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
	e, p, err := events.Decode(mustEncode(t, in))
	if err != nil {
		t.Fatal(err)
	}
	out, ok := p.(events.OrderCreated)
	if !ok {
		t.Fatalf("payload is a %T, want events.OrderCreated", p)
	}
	if e.Type != events.TypeOrderCreated || e.OrderID != "order-1" || out.TotalAmount != 5000 || out.Items[0].SKU != "SKU-1" {
		t.Fatalf("round trip lost data: %+v %+v", e, out)
	}
}

// TestCancelEventsRoundTrip: the cancel request and the three
// acknowledgements decode as their own types, and the request takes only
// the two cancel reasons.
func TestCancelEventsRoundTrip(t *testing.T) {
	for _, in := range []events.Payload{
		events.OrderCancelRequested{Reason: events.ReasonCustomerCancelled},
		events.OrderCancelRequested{Reason: events.ReasonTimeout},
		events.PaymentCancelled{CustomerID: "c-1", Amount: 5000},
		events.PaymentCancelled{},
		events.InventoryCancelled{Items: []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}}},
		events.InventoryCancelled{},
		events.ShipmentCancelled{WasScheduled: true},
	} {
		t.Run(in.EventType(), func(t *testing.T) {
			e, out, err := events.Decode(mustEncode(t, in))
			if err != nil {
				t.Fatal(err)
			}
			if e.Type != in.EventType() {
				t.Fatalf("type = %s, want %s", e.Type, in.EventType())
			}
			if got, want := fmt.Sprintf("%#v", out), fmt.Sprintf("%#v", in); got != want {
				t.Fatalf("round trip = %s, want %s", got, want)
			}
		})
	}
	for _, bad := range []events.Payload{
		events.OrderCancelRequested{},
		events.OrderCancelRequested{Reason: events.ReasonOutOfStock},
		events.PaymentCancelled{Amount: -1},
		events.InventoryCancelled{Items: []events.Item{{SKU: "SKU-1", Quantity: 0}}},
	} {
		if _, err := events.New("test", "o", bad, time.Now()); err == nil {
			t.Errorf("New(%#v) = nil error, want it refused", bad)
		}
	}
}

func TestNewRejectsInvalidPayload(t *testing.T) {
	if _, err := events.New("test", "o", events.PaymentRefunded{Reason: "because"}, time.Now()); err == nil {
		t.Fatal("want an error for an unknown refund reason")
	}
}

// envelope returns an envelope's JSON; orderID and payload are inserted as
// they are, so they may hold JSON escapes.
func envelope(id, typ, orderID, payload string) string {
	return `{"id":"` + id + `","type":"` + typ + `","order_id":"` + orderID + `","payload":` + payload + `}`
}

// created returns an OrderCreated payload with one item (sku S, quantity 1,
// unit_price 1) and the given total and address fields.
func created(total, addressFields string) string {
	return `{"customer_id":"c","items":[{"sku":"S","quantity":1,"unit_price":1}],` + total +
		`,"currency":"JPY","shipping_address":{"country":"JP",` + addressFields + `}}`
}

// maxAmount is events.MaxAmount as JSON.
const maxAmount = "1000000000000000"

func TestDecodePoison(t *testing.T) {
	valid := string(mustEncode(t, events.ShipmentScheduled{Country: "JP"}))
	id := "6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10"
	tests := []struct {
		name  string
		value string
		want  error
	}{
		{"NotJSON", "not json", events.ErrMalformed},
		{"Empty", "", events.ErrMalformed},
		// Unknown fields are ignored (TestAddOptionalFieldIsSafe), but
		// they must still be JSON, and known fields keep their types.
		{"UnknownEnvelopeFieldNotJSON", strings.Replace(valid, `{"id"`, `{"extra":undefined,"id"`, 1), events.ErrMalformed},
		{"EnvelopeFieldWrongType", strings.Replace(valid, `"order_id":"order-1"`, `"order_id":1`, 1), events.ErrMalformed},
		{"VersionWrongType", strings.Replace(valid, `"version":1`, `"version":"1"`, 1), events.ErrMalformed},
		{"VersionFraction", strings.Replace(valid, `"version":1`, `"version":1.5`, 1), events.ErrMalformed},
		{"VersionNegative", strings.Replace(valid, `"version":1`, `"version":-1`, 1), events.ErrMalformed},
		{"VersionNewer", strings.Replace(valid, `"version":1`, `"version":2`, 1), events.ErrUnsupportedVersion},
		{"IDNotUUID", `{"id":"x","type":"ShipmentScheduled","order_id":"o","payload":{"country":"JP"}}`, events.ErrMalformed},
		{"NoOrderID", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","payload":{"country":"JP"}}`, events.ErrMalformed},
		{"UnknownType", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"OrderTeleported","order_id":"o","payload":{}}`, events.ErrUnknownType},
		{"PayloadFailsValidation", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o","payload":{"country":"JAPAN"}}`, events.ErrInvalid},
		{"PayloadUnknownFieldRequiredMissing", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o","payload":{"x":1}}`, events.ErrInvalid},
		{"PayloadFieldWrongType", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o","payload":{"country":1,"x":1}}`, events.ErrInvalid},
		{"PayloadNestedFieldWrongType", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"quantity":1`, `"quantity":"1"`, 1)), events.ErrInvalid},
		{"PayloadNull", envelope(id, "ShipmentScheduled", "o", `null`), events.ErrInvalid},
		{"PayloadMissing", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"ShipmentScheduled","order_id":"o"}`, events.ErrInvalid},
		{"UnknownTypeNewerVersion", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"OrderTeleported","version":9,"order_id":"o","payload":{}}`, events.ErrUnknownType},
		{"PayloadWrongShape", `{"id":"6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10","type":"OrderCreated","order_id":"o","payload":[1,2]}`, events.ErrInvalid},
		{"Oversize", `{"id":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}`, events.ErrMalformed},
		// uuid.Parse accepts these spellings; PostgreSQL's uuid type and
		// string comparison of event ids do not all agree, so only the
		// canonical form passes.
		{"IDURN", envelope("urn:uuid:"+id, "ShipmentScheduled", "o", `{"country":"JP"}`), events.ErrMalformed},
		{"IDBraces", envelope("{"+id+"}", "ShipmentScheduled", "o", `{"country":"JP"}`), events.ErrMalformed},
		{"IDNoHyphens", envelope(strings.ReplaceAll(id, "-", ""), "ShipmentScheduled", "o", `{"country":"JP"}`), events.ErrMalformed},
		{"IDUpperCase", envelope(strings.ToUpper(id), "ShipmentScheduled", "o", `{"country":"JP"}`), events.ErrMalformed},
		{"OrderIDTooLong", envelope(id, "ShipmentScheduled", strings.Repeat("o", 65), `{"country":"JP"}`), events.ErrMalformed},
		{"OrderIDControlChar", envelope(id, "ShipmentScheduled", `o\n1`, `{"country":"JP"}`), events.ErrMalformed},
		{"OrderIDDEL", envelope(id, "ShipmentScheduled", "o\x7f", `{"country":"JP"}`), events.ErrMalformed},
		{"NULInOrderID", envelope(id, "ShipmentScheduled", `o\u0000`, `{"country":"JP"}`), events.ErrMalformed},
		{"NULInPayload", envelope(id, "ShipmentScheduled", "o", `{"country":"J\u0000"}`), events.ErrMalformed},
		{"NULInAddressLine", envelope(id, "OrderCreated", "o", created(`"total_amount":1`, `"line1":"a\u0000b"`)), events.ErrMalformed},
		{"NULAfterEscapedBackslash", envelope(id, "OrderCreated", "o", created(`"total_amount":1`, `"line1":"a\\\u0000"`)), events.ErrMalformed},
		{"TrailingObject", valid + `{}`, events.ErrMalformed},
		{"TrailingGarbage", valid + ` x`, events.ErrMalformed},
		{"TotalAboveMax", envelope(id, "OrderCreated", "o", created(`"total_amount":1000000000000001`, `"line1":"x"`)), events.ErrInvalid},
		{"UnitPriceAboveMax", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"unit_price":1`, `"unit_price":1000000000000001`, 1)), events.ErrInvalid},
		{"QuantityAboveMax", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"quantity":1`, `"quantity":1000000000000001`, 1)), events.ErrInvalid},
		{"SKUTooLong", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"sku":"S"`, `"sku":"`+strings.Repeat("s", 65)+`"`, 1)), events.ErrInvalid},
		{"SKUControlChar", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"sku":"S"`, `"sku":"S\t"`, 1)), events.ErrInvalid},
		{"CustomerIDTooLong", envelope(id, "OrderCreated", "o", strings.Replace(created(`"total_amount":1`, `"line1":"x"`), `"customer_id":"c"`, `"customer_id":"`+strings.Repeat("c", 65)+`"`, 1)), events.ErrInvalid},
		// The total is what payment charges and the items what inventory
		// reserves, so the two must agree; the products of lines at the
		// limits would wrap around int64 if multiplied unchecked.
		{"TotalNotTheItemsSum", envelope(id, "OrderCreated", "o", created(`"total_amount":2`, `"line1":"x"`)), events.ErrInvalid},
		{"TotalZeroForPricedItems", envelope(id, "OrderCreated", "o", created(`"total_amount":0`, `"line1":"x"`)), events.ErrInvalid},
		{"ItemsSumAboveMax", envelope(id, "OrderCreated", "o", strings.NewReplacer(
			`"quantity":1`, `"quantity":`+maxAmount, `"unit_price":1`, `"unit_price":`+maxAmount,
		).Replace(created(`"total_amount":`+maxAmount, `"line1":"x"`))), events.ErrInvalid},
		{"ItemsProductWrapsToTotal", envelope(id, "OrderCreated", "o", strings.NewReplacer(
			// 4294967296 × 4294967297 wraps to 4294967296 in int64.
			`"quantity":1`, `"quantity":4294967296`, `"unit_price":1`, `"unit_price":4294967297`,
		).Replace(created(`"total_amount":4294967296`, `"line1":"x"`))), events.ErrInvalid},
		{"PaymentAmountAboveMax", envelope(id, "PaymentDeclined", "o", `{"customer_id":"c","amount":1000000000000001,"detail":"x"}`), events.ErrInvalid},
		{"RefundAmountAboveMax", envelope(id, "PaymentRefunded", "o", `{"amount":9223372036854775807,"reason":"out_of_stock"}`), events.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := events.Decode([]byte(tt.value))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeRejectsMismatchedPayloadType(t *testing.T) {
	e, _, err := events.Decode(mustEncode(t, events.ShipmentScheduled{Country: "JP"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Decode(&events.ShipmentFailed{}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

// TestDecodeAcceptsTheLimits: the checks above reject what is past a limit,
// not what is at it.
func TestDecodeAcceptsTheLimits(t *testing.T) {
	id := "6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10"
	max := "1000000000000000"
	tests := []struct{ name, value string }{
		{"QuantityAtMax", envelope(id, "OrderCreated", "o", strings.Replace(
			created(`"total_amount":`+max, `"line1":"x"`), `"quantity":1`, `"quantity":`+max, 1))},
		{"UnitPriceAtMax", envelope(id, "OrderCreated", "o", strings.Replace(
			created(`"total_amount":`+max, `"line1":"x"`), `"unit_price":1`, `"unit_price":`+max, 1))},
		{"OrderIDOf64Bytes", envelope(id, "ShipmentScheduled", strings.Repeat("o", 64), `{"country":"JP"}`)},
		{"NonASCIIOrderID", envelope(id, "ShipmentScheduled", "注文-1", `{"country":"JP"}`)},
		// An escaped backslash followed by u0000 is text, not a NUL.
		{"EscapedBackslashThenU0000", envelope(id, "OrderCreated", "o", created(`"total_amount":1`, `"line1":"C:\\u0000"`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := events.Decode([]byte(tt.value)); err != nil {
				t.Fatalf("Decode(%s) = %v, want nil", tt.value, err)
			}
		})
	}
}

func TestTopicOf(t *testing.T) {
	tests := []struct{ typ, topic string }{
		{events.TypeOrderCreated, events.TopicOrder},
		{events.TypeOrderCompleted, events.TopicOrder},
		{events.TypeOrderCancelled, events.TopicOrder},
		{events.TypeOrderCancelRequested, events.TopicOrder},
		{events.TypePaymentCancelled, events.TopicPayment},
		{events.TypeInventoryCancelled, events.TopicInventory},
		{events.TypeShipmentCancelled, events.TopicShipping},
		{events.TypePaymentCompleted, events.TopicPayment},
		{events.TypePaymentDeclined, events.TopicPayment},
		{events.TypePaymentRefunded, events.TopicPayment},
		{events.TypeInventoryReserved, events.TopicInventory},
		{events.TypeInventoryRejected, events.TopicInventory},
		{events.TypeInventoryReleased, events.TopicInventory},
		{events.TypeShipmentScheduled, events.TopicShipping},
		{events.TypeShipmentFailed, events.TopicShipping},
	}
	for _, tt := range tests {
		if got, ok := events.TopicOf(tt.typ); !ok || got != tt.topic {
			t.Errorf("TopicOf(%s) = %q, %v; want %q", tt.typ, got, ok, tt.topic)
		}
	}
	if got, ok := events.TopicOf("OrderTeleported"); ok {
		t.Errorf("TopicOf(unknown) = %q, true; want false", got)
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"a", "c-1", "SKU_1.2", "x~y:z@w", strings.Repeat("9", events.MaxIDLen)} {
		if !events.ValidID(id) {
			t.Errorf("ValidID(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", strings.Repeat("9", events.MaxIDLen+1), "a b", "a/b", "a%2Fb", "a\x00", "a\n", "é", "a\u200bb", "a?b", "a#b"} {
		if events.ValidID(id) {
			t.Errorf("ValidID(%q) = true, want false", id)
		}
	}
}
