package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
)

func validRequest() domain.Request {
	return domain.Request{
		CustomerID:      "c-1",
		Items:           []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
		Currency:        "JPY",
		ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
	}
}

func items(n int) []events.Item {
	its := make([]events.Item, n)
	for i := range its {
		its[i] = events.Item{SKU: "SKU-1", Quantity: 1, UnitPrice: 10}
	}
	return its
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(r *domain.Request)
		wantErr string // substring; "" means valid
		check   func(t *testing.T, d domain.Draft)
	}{
		{"ValidRequestIsPriced", func(r *domain.Request) {}, "", func(t *testing.T, d domain.Draft) {
			if d.TotalAmount != 5000 {
				t.Errorf("total = %d, want 5000", d.TotalAmount)
			}
		}},
		{"TotalSumsEveryLine", func(r *domain.Request) {
			r.Items = []events.Item{{SKU: "A", Quantity: 2, UnitPrice: 2500}, {SKU: "B", Quantity: 3, UnitPrice: 100}, {SKU: "C", Quantity: 7, UnitPrice: 0}}
		}, "", func(t *testing.T, d domain.Draft) {
			if d.TotalAmount != 5300 {
				t.Errorf("total = %d, want 5300", d.TotalAmount)
			}
		}},
		{"EmptyCustomerRejected", func(r *domain.Request) { r.CustomerID = "" }, "customer_id", nil},
		{"Customer64BytesAccepted", func(r *domain.Request) { r.CustomerID = strings.Repeat("c", 64) }, "", nil},
		{"Customer65BytesRejected", func(r *domain.Request) { r.CustomerID = strings.Repeat("c", 65) }, "customer_id", nil},
		{"NoItemsRejected", func(r *domain.Request) { r.Items = nil }, "items", nil},
		{"HundredItemsAccepted", func(r *domain.Request) { r.Items = items(100) }, "", func(t *testing.T, d domain.Draft) {
			if d.TotalAmount != 1000 {
				t.Errorf("total = %d, want 1000", d.TotalAmount)
			}
		}},
		{"HundredAndOneItemsRejected", func(r *domain.Request) { r.Items = items(101) }, "items", nil},
		{"EmptySKURejected", func(r *domain.Request) { r.Items[0].SKU = "" }, "items[0].sku", nil},
		{"SKU64BytesAccepted", func(r *domain.Request) { r.Items[0].SKU = strings.Repeat("s", 64) }, "", nil},
		{"SKU65BytesRejected", func(r *domain.Request) { r.Items[0].SKU = strings.Repeat("s", 65) }, "items[0].sku", nil},
		{"ZeroQuantityRejected", func(r *domain.Request) { r.Items[0].Quantity = 0 }, "items[0].quantity", nil},
		{"NegativeQuantityRejected", func(r *domain.Request) { r.Items[0].Quantity = -1 }, "items[0].quantity", nil},
		{"NegativePriceRejected", func(r *domain.Request) { r.Items[0].UnitPrice = -1 }, "items[0].unit_price", nil},
		{"FreeItemAccepted", func(r *domain.Request) { r.Items[0].UnitPrice = 0 }, "", func(t *testing.T, d domain.Draft) {
			if d.TotalAmount != 0 {
				t.Errorf("total = %d, want 0", d.TotalAmount)
			}
		}},
		{"LineOverflowRejected", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: events.MaxAmount, UnitPrice: events.MaxAmount}
		}, "total overflows", nil},
		{"SumOverflowRejected", func(r *domain.Request) {
			r.Items = []events.Item{{SKU: "A", Quantity: events.MaxAmount, UnitPrice: 5000}, {SKU: "B", Quantity: events.MaxAmount, UnitPrice: 5000}}
		}, "total overflows", nil},
		{"TotalOfExactlyMaxAmountAccepted", func(r *domain.Request) {
			r.Items = []events.Item{{SKU: "A", Quantity: 1, UnitPrice: events.MaxAmount - 1}, {SKU: "B", Quantity: 1, UnitPrice: 1}}
		}, "", func(t *testing.T, d domain.Draft) {
			if d.TotalAmount != events.MaxAmount {
				t.Errorf("total = %d, want MaxAmount", d.TotalAmount)
			}
		}},
		{"TotalAboveMaxAmountRejected", func(r *domain.Request) {
			r.Items = []events.Item{{SKU: "A", Quantity: 1, UnitPrice: events.MaxAmount}, {SKU: "B", Quantity: 1, UnitPrice: 1}}
		}, "total exceeds 1000000000000000", nil},
		{"LineAboveMaxAmountRejected", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: 2, UnitPrice: events.MaxAmount/2 + 1}
		}, "total exceeds", nil},
		{"MaxQuantityOfFreeItemAccepted", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: events.MaxAmount, UnitPrice: 0}
		}, "", nil},
		// A free item's quantity is not bounded by the total; it still ends
		// up in the inventory's bigint arithmetic.
		{"QuantityAboveMaxAmountRejected", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: events.MaxAmount + 1, UnitPrice: 0}
		}, "items[0].quantity", nil},
		{"HugeQuantityOfFreeItemRejected", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: math.MaxInt64, UnitPrice: 0}
		}, "items[0].quantity", nil},
		{"UnitPriceAboveMaxAmountRejected", func(r *domain.Request) {
			r.Items[0] = events.Item{SKU: "A", Quantity: 1, UnitPrice: events.MaxAmount + 1}
		}, "items[0].unit_price", nil},
		// Ids follow events.IDPattern, so the other services can be asked
		// about every customer and SKU an order names.
		{"CustomerWithEveryAllowedCharacterAccepted", func(r *domain.Request) { r.CustomerID = "Az09._~:@-" }, "", nil},
		{"CustomerWithNULRejected", func(r *domain.Request) { r.CustomerID = "c\x00" }, "customer_id", nil},
		{"CustomerWithSlashRejected", func(r *domain.Request) { r.CustomerID = "c/1" }, "customer_id", nil},
		{"CustomerWithSpaceRejected", func(r *domain.Request) { r.CustomerID = "c 1" }, "customer_id", nil},
		{"CustomerWithPercentRejected", func(r *domain.Request) { r.CustomerID = "c%2F1" }, "customer_id", nil},
		{"NonASCIICustomerRejected", func(r *domain.Request) { r.CustomerID = "顧客" }, "customer_id", nil},
		{"SKUWithNULRejected", func(r *domain.Request) { r.Items[0].SKU = "S\x00" }, "items[0].sku", nil},
		{"SKUWithSlashRejected", func(r *domain.Request) { r.Items[0].SKU = "a/b" }, "items[0].sku", nil},
		{"Line1WithNULRejected", func(r *domain.Request) { r.ShippingAddress.Line1 = "1-1\x00Chiyoda" }, "line1", nil},
		{"Line1WithNewlineRejected", func(r *domain.Request) { r.ShippingAddress.Line1 = "1-1\nChiyoda" }, "line1", nil},
		{"Line1WithC1ControlRejected", func(r *domain.Request) { r.ShippingAddress.Line1 = "1-1\u0085Chiyoda" }, "line1", nil},
		{"PostalCodeWithNULRejected", func(r *domain.Request) { r.ShippingAddress.PostalCode = "\x00" }, "postal_code", nil},
		{"PostalCodeWithTabRejected", func(r *domain.Request) { r.ShippingAddress.PostalCode = "100\t0001" }, "postal_code", nil},
		{"MissingCurrencyDefaultsToJPY", func(r *domain.Request) { r.Currency = "" }, "", func(t *testing.T, d domain.Draft) {
			if d.Currency != "JPY" {
				t.Errorf("currency = %q, want JPY", d.Currency)
			}
		}},
		{"OtherCurrencyKept", func(r *domain.Request) { r.Currency = "USD" }, "", func(t *testing.T, d domain.Draft) {
			if d.Currency != "USD" {
				t.Errorf("currency = %q, want USD", d.Currency)
			}
		}},
		{"LowerCaseCurrencyUpperCased", func(r *domain.Request) { r.Currency = "jpy" }, "", func(t *testing.T, d domain.Draft) {
			if d.Currency != "JPY" {
				t.Errorf("currency = %q, want JPY", d.Currency)
			}
		}},
		{"TwoLetterCurrencyRejected", func(r *domain.Request) { r.Currency = "JP" }, "currency", nil},
		{"FourLetterCurrencyRejected", func(r *domain.Request) { r.Currency = "JPYY" }, "currency", nil},
		{"DigitInCurrencyRejected", func(r *domain.Request) { r.Currency = "JP1" }, "currency", nil},
		{"LowerCaseCountryUpperCased", func(r *domain.Request) { r.ShippingAddress.Country = "jp" }, "", func(t *testing.T, d domain.Draft) {
			if d.ShippingAddress.Country != "JP" {
				t.Errorf("country = %q, want JP", d.ShippingAddress.Country)
			}
		}},
		{"MissingCountryRejected", func(r *domain.Request) { r.ShippingAddress.Country = "" }, "shipping_address.country", nil},
		{"ThreeLetterCountryRejected", func(r *domain.Request) { r.ShippingAddress.Country = "JPN" }, "shipping_address.country", nil},
		{"NonLetterCountryRejected", func(r *domain.Request) { r.ShippingAddress.Country = "J1" }, "shipping_address.country", nil},
		{"NonASCIICountryRejected", func(r *domain.Request) { r.ShippingAddress.Country = "Ü" }, "shipping_address.country", nil},
		{"OptionalAddressFieldsMayBeEmpty", func(r *domain.Request) { r.ShippingAddress.PostalCode, r.ShippingAddress.Line1 = "", "" }, "", nil},
		{"PostalCode200CharsAccepted", func(r *domain.Request) { r.ShippingAddress.PostalCode = strings.Repeat("〒", 200) }, "", nil},
		{"PostalCode201CharsRejected", func(r *domain.Request) { r.ShippingAddress.PostalCode = strings.Repeat("1", 201) }, "postal_code", nil},
		{"Line1200CharsAccepted", func(r *domain.Request) { r.ShippingAddress.Line1 = strings.Repeat("東", 200) }, "", nil},
		{"Line1201CharsRejected", func(r *domain.Request) { r.ShippingAddress.Line1 = strings.Repeat("x", 201) }, "line1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRequest()
			tt.change(&r)
			d, err := domain.Validate(r)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: unexpected error %v", err)
				}
				if tt.check != nil {
					tt.check(t, d)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateOverflowIsErrTotalOverflow(t *testing.T) {
	r := validRequest()
	r.Items[0] = events.Item{SKU: "A", Quantity: events.MaxAmount, UnitPrice: events.MaxAmount}
	if _, err := domain.Validate(r); !errors.Is(err, domain.ErrTotalOverflow) {
		t.Fatalf("Validate error = %v, want ErrTotalOverflow", err)
	}
}

func TestValidateIdempotencyKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"OneCharAccepted", "k", true},
		{"UUIDAccepted", "6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10", true},
		{"PrintablePunctuationAccepted", "order:2024/01 #1 ~!", true},
		{"255CharsAccepted", strings.Repeat("k", 255), true},
		{"EmptyRejected", "", false},
		{"256CharsRejected", strings.Repeat("k", 256), false},
		{"ControlCharRejected", "key\x01", false},
		{"TabRejected", "key\tx", false},
		{"DELRejected", "key\x7f", false},
		{"NonASCIIRejected", "キー", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.ValidateIdempotencyKey(tt.key)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateIdempotencyKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
			}
		})
	}
}

// decodeDraft decodes a request body the way the API does and validates it.
func decodeDraft(t *testing.T, body string) domain.Draft {
	t.Helper()
	var r domain.Request
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	d, err := domain.Validate(r)
	if err != nil {
		t.Fatalf("validate %s: %v", body, err)
	}
	return d
}

func TestDraftHashIgnoresFormattingButNotContent(t *testing.T) {
	base := `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001"}}`
	want := decodeDraft(t, base).Hash()
	if len(want) != 64 {
		t.Fatalf("hash %q is not 64 hex characters", want)
	}

	same := map[string]string{
		"Indented": `{
			"customer_id": "c-1",
			"items": [ { "sku": "SKU-1", "quantity": 2, "unit_price": 2500 } ],
			"currency": "JPY",
			"shipping_address": { "country": "JP", "postal_code": "100-0001" }
		}`,
		"FieldsReordered":        `{"shipping_address":{"postal_code":"100-0001","country":"JP"},"currency":"JPY","items":[{"unit_price":2500,"quantity":2,"sku":"SKU-1"}],"customer_id":"c-1"}`,
		"DefaultCurrencyOmitted": `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"shipping_address":{"country":"JP","postal_code":"100-0001"}}`,
		"LowerCaseCountry":       `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"jp","postal_code":"100-0001"}}`,
		"EmptyOptionalField":     `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001","line1":""}}`,
	}
	for name, body := range same {
		t.Run(name+"HashesTheSame", func(t *testing.T) {
			if got := decodeDraft(t, body).Hash(); got != want {
				t.Fatalf("hash = %s, want %s", got, want)
			}
		})
	}

	different := map[string]string{
		"OtherCustomer":  `{"customer_id":"c-2","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001"}}`,
		"OtherQuantity":  `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":3,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001"}}`,
		"OtherCurrency":  `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"USD","shipping_address":{"country":"JP","postal_code":"100-0001"}}`,
		"OtherAddress":   `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0002"}}`,
		"ExtraItem":      `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500},{"sku":"SKU-2","quantity":1,"unit_price":1}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001"}}`,
		"PostalCodeGone": `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP"}}`,
	}
	for name, body := range different {
		t.Run(name+"HashesDifferently", func(t *testing.T) {
			if got := decodeDraft(t, body).Hash(); got == want {
				t.Fatalf("hash of a different request equals the base hash %s", got)
			}
		})
	}
}

func TestDraftHashIsStable(t *testing.T) {
	// A pinned value: the hash is stored with every order, so changing the
	// canonical form would turn honest replays of existing keys into 422s.
	d := domain.Draft{
		CustomerID:      "c-1",
		Items:           []events.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: 2500}},
		TotalAmount:     5000,
		Currency:        "JPY",
		ShippingAddress: events.Address{Country: "JP"},
	}
	const canonical = `{"customer_id":"c-1","items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"total_amount":5000,"currency":"JPY","shipping_address":{"country":"JP"}}`
	b, _ := json.Marshal(d)
	if string(b) != canonical {
		t.Fatalf("canonical form changed:\n got %s\nwant %s", b, canonical)
	}
	// sha256 of canonical, as `printf '%s' "$canonical" | sha256sum` prints it.
	const want = "c337d78896942dbfae406172aaa526d49c003c7c525ecb2ec5a2f661fd0cca93"
	for range 3 {
		if got := d.Hash(); got != want {
			t.Fatalf("Hash = %s, want %s", got, want)
		}
	}
}

func TestTransition(t *testing.T) {
	shipped := domain.Event{Type: events.TypeShipmentScheduled}
	declined := domain.Event{Type: events.TypePaymentDeclined, Reason: events.ReasonInsufficientFunds}
	unknownCustomer := domain.Event{Type: events.TypePaymentDeclined, Reason: events.ReasonUnknownCustomer}
	otherCurrency := domain.Event{Type: events.TypePaymentDeclined, Reason: events.ReasonCurrencyMismatch}
	declinedWithoutDetail := domain.Event{Type: events.TypePaymentDeclined}
	refundedStock := domain.Event{Type: events.TypePaymentRefunded, Reason: events.ReasonOutOfStock}
	refundedShipping := domain.Event{Type: events.TypePaymentRefunded, Reason: events.ReasonShippingUnavailable}
	paymentAck := domain.Event{Type: events.TypePaymentCancelled}
	inventoryAck := domain.Event{Type: events.TypeInventoryCancelled}
	shipmentAck := domain.Event{Type: events.TypeShipmentCancelled}

	pending := domain.State{Status: domain.StatusPending}
	completed := domain.State{Status: domain.StatusCompleted}
	cancelled := func(reason string) domain.State { return domain.State{Status: domain.StatusCancelled, Reason: reason} }
	cancelling := func(acks domain.Acks) domain.State {
		return domain.State{Status: domain.StatusCancelling, Reason: events.ReasonCustomerCancelled, Acks: acks}
	}
	all := domain.Acks{Payment: true, Inventory: true, Shipment: true}
	tests := []struct {
		name       string
		current    domain.State
		ev         domain.Event
		want       domain.State
		wantChange bool
	}{
		{"ShipmentCompletesPendingOrder", pending, shipped, completed, true},
		{"TooLittleMoneyCancelsWithInsufficientFunds", pending, declined, cancelled(events.ReasonInsufficientFunds), true},
		{"UnknownCustomerCancelsWithUnknownCustomer", pending, unknownCustomer, cancelled(events.ReasonUnknownCustomer), true},
		{"OtherCurrencyCancelsWithCurrencyMismatch", pending, otherCurrency, cancelled(events.ReasonCurrencyMismatch), true},
		{"DeclineWithoutDetailCancelsWithPaymentDeclined", pending, declinedWithoutDetail, cancelled(events.ReasonPaymentDeclined), true},
		{"RefundForStockCancelsWithOutOfStock", pending, refundedStock, cancelled(events.ReasonOutOfStock), true},
		{"RefundForShippingCancelsWithShippingUnavailable", pending, refundedShipping, cancelled(events.ReasonShippingUnavailable), true},
		{"LateShipmentAfterCancelIsNoOp", cancelled(events.ReasonOutOfStock), shipped, cancelled(events.ReasonOutOfStock), false},
		{"DuplicateDeclineIsNoOp", cancelled(events.ReasonInsufficientFunds), declined, cancelled(events.ReasonInsufficientFunds), false},
		{"DuplicateRefundIsNoOp", cancelled(events.ReasonOutOfStock), refundedStock, cancelled(events.ReasonOutOfStock), false},
		{"DuplicateShipmentIsNoOp", completed, shipped, completed, false},
		{"CancelAfterCompletionIsNoOp", completed, refundedShipping, completed, false},
		{"DeclineAfterCompletionIsNoOp", completed, declined, completed, false},
		{"PaymentCompletedChangesNothing", pending, domain.Event{Type: events.TypePaymentCompleted}, pending, false},
		{"UnknownEventChangesNothing", pending, domain.Event{Type: "Nonsense"}, pending, false},

		// The cancel path.
		{"AckOfPendingOrderIsIgnored", pending, paymentAck, pending, false},
		{"FirstAckIsCounted", cancelling(domain.Acks{}), paymentAck, cancelling(domain.Acks{Payment: true}), true},
		{"InventoryAckIsCounted", cancelling(domain.Acks{}), inventoryAck, cancelling(domain.Acks{Inventory: true}), true},
		{"ShipmentAckIsCounted", cancelling(domain.Acks{}), shipmentAck, cancelling(domain.Acks{Shipment: true}), true},
		{"DuplicateAckIsNoOp", cancelling(domain.Acks{Payment: true}), paymentAck, cancelling(domain.Acks{Payment: true}), false},
		{"ThirdAckCancelsWithTheRequestedReason", cancelling(domain.Acks{Payment: true, Inventory: true}), shipmentAck,
			domain.State{Status: domain.StatusCancelled, Reason: events.ReasonCustomerCancelled, Acks: all}, true},
		{"TimeoutKeepsItsReason", domain.State{Status: domain.StatusCancelling, Reason: events.ReasonTimeout, Acks: domain.Acks{Inventory: true, Shipment: true}}, paymentAck,
			domain.State{Status: domain.StatusCancelled, Reason: events.ReasonTimeout, Acks: all}, true},
		{"ShipmentScheduledDuringCancelDoesNotComplete", cancelling(domain.Acks{Payment: true}), shipped, cancelling(domain.Acks{Payment: true}), false},
		{"DeclineDuringCancelLeavesItToTheAcks", cancelling(domain.Acks{}), declined, cancelling(domain.Acks{}), false},
		{"RefundDuringCancelLeavesItToTheAcks", cancelling(domain.Acks{Inventory: true}), refundedShipping, cancelling(domain.Acks{Inventory: true}), false},
		{"LateAckAfterCancelledIsNoOp", domain.State{Status: domain.StatusCancelled, Reason: events.ReasonCustomerCancelled, Acks: all}, paymentAck,
			domain.State{Status: domain.StatusCancelled, Reason: events.ReasonCustomerCancelled, Acks: all}, false},
		{"AckAfterCompletionIsNoOp", completed, shipmentAck, completed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, changed := domain.Transition(tt.current, tt.ev)
			if next != tt.want || changed != tt.wantChange {
				t.Fatalf("Transition(%+v, %+v) = (%+v, %v), want (%+v, %v)",
					tt.current, tt.ev, next, changed, tt.want, tt.wantChange)
			}
		})
	}
}

// TestAcksInAnyOrderCancelOnce delivers the three acknowledgements in every
// order, each twice: the order is CANCELLED with the requested reason on
// the third distinct one, exactly once, and nothing changes after.
func TestAcksInAnyOrderCancelOnce(t *testing.T) {
	acks := []string{events.TypePaymentCancelled, events.TypeInventoryCancelled, events.TypeShipmentCancelled}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		name := ""
		for _, i := range order {
			name += strings.TrimSuffix(acks[i], "Cancelled")
		}
		t.Run(name, func(t *testing.T) {
			s := domain.State{Status: domain.StatusCancelling, Reason: events.ReasonCustomerCancelled}
			ends := 0
			for n, i := range order {
				for range 2 {
					next, changed := domain.Transition(s, domain.Event{Type: acks[i]})
					if changed && next.Status == domain.StatusCancelled {
						ends++
					}
					s = next
				}
				if want := n == len(order)-1; (s.Status == domain.StatusCancelled) != want {
					t.Fatalf("after %d acks status = %s", n+1, s.Status)
				}
			}
			if ends != 1 || s.Reason != events.ReasonCustomerCancelled {
				t.Fatalf("ended %d times, reason %q; want once, %q", ends, s.Reason, events.ReasonCustomerCancelled)
			}
		})
	}
}

func TestDecideCancel(t *testing.T) {
	tests := []struct {
		current domain.Status
		want    domain.CancelDecision
	}{
		{domain.StatusPending, domain.CancelAccepted},
		{domain.StatusCancelling, domain.CancelAlreadyRequested},
		{domain.StatusCompleted, domain.CancelRefused},
		{domain.StatusCancelled, domain.CancelRefused},
	}
	for _, tt := range tests {
		t.Run(string(tt.current), func(t *testing.T) {
			if got := domain.DecideCancel(tt.current); got != tt.want {
				t.Fatalf("DecideCancel(%s) = %v, want %v", tt.current, got, tt.want)
			}
		})
	}
}

func TestNewOrderIsPendingAndAnnouncesItsDraft(t *testing.T) {
	d, err := domain.Validate(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	o := domain.NewOrder("0b9c7f5e-2f6a-4d7e-9a39-1f0e2c3d4b5a", d)
	if o.Status != domain.StatusPending || o.CancelReason != "" || o.RequestHash != d.Hash() {
		t.Fatalf("NewOrder = %+v", o)
	}
	p := o.Created()
	if err := p.Validate(); err != nil {
		t.Fatalf("OrderCreated of a valid order is invalid: %v", err)
	}
	if p.TotalAmount != 5000 || p.CustomerID != "c-1" || p.Currency != "JPY" || p.ShippingAddress.Country != "JP" || len(p.Items) != 1 {
		t.Fatalf("Created = %+v", p)
	}
}

// TestDeclineReason: the order keeps payment's word for a decline it knows,
// and a reason that is still true for one it does not.
func TestDeclineReason(t *testing.T) {
	tests := []struct{ detail, want string }{
		{events.ReasonInsufficientFunds, events.ReasonInsufficientFunds},
		{events.ReasonUnknownCustomer, events.ReasonUnknownCustomer},
		{events.ReasonCurrencyMismatch, events.ReasonCurrencyMismatch},
		{"", events.ReasonPaymentDeclined},                   // a producer that sent no detail
		{"card_expired", events.ReasonPaymentDeclined},       // a newer producer's word
		{"negative amount -1", events.ReasonPaymentDeclined}, // free text is never an API value
	}
	for _, tt := range tests {
		t.Run(tt.want+"/"+tt.detail, func(t *testing.T) {
			if got := domain.DeclineReason(tt.detail); got != tt.want {
				t.Fatalf("DeclineReason(%q) = %q, want %q", tt.detail, got, tt.want)
			}
		})
	}
}
