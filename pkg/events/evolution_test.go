package events_test

// The evolution rules of docs/event-evolution.md, one test each. No real
// event type has a second version yet, so the rename and remove tests give
// OrderCreated a made-up history with events.SetUpcasters (export_test.go):
// the mechanism is the one a real v2 would use.

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

const evolutionID = "6f1c1a52-9b4e-4a4e-8f0e-5e2d3c7a9d10"

// versioned returns an envelope's JSON with a version field.
func versioned(version int, typ, payload string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"version":%d,"order_id":"o","payload":%s}`, evolutionID, typ, version, payload)
}

// editObject applies edit to a payload that must be a JSON object.
func editObject(payload json.RawMessage, edit func(map[string]json.RawMessage)) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("payload is not a JSON object")
	}
	edit(fields)
	return json.Marshal(fields)
}

// renameField is the upcaster of a version that renamed from to to.
func renameField(from, to string) events.Upcaster {
	return func(payload json.RawMessage) (json.RawMessage, error) {
		return editObject(payload, func(f map[string]json.RawMessage) {
			if v, ok := f[from]; ok {
				f[to] = v
				delete(f, from)
			}
		})
	}
}

// removeField is the upcaster of a version that removed name.
func removeField(name string) events.Upcaster {
	return func(payload json.RawMessage) (json.RawMessage, error) {
		return editObject(payload, func(f map[string]json.RawMessage) { delete(f, name) })
	}
}

// addFields inserts JSON members (`"k":v,…`) at the start of the object
// that begins at the first occurrence of after in value.
func addFields(t *testing.T, value, after, members string) string {
	t.Helper()
	i := strings.Index(value, after)
	if i < 0 {
		t.Fatalf("%q not found in %s", after, value)
	}
	i += len(after)
	return value[:i] + members + "," + value[i:]
}

// every holds one valid payload of every event type.
var every = []events.Payload{
	events.OrderCreated{CustomerID: "c", Items: []events.Item{{SKU: "S", Quantity: 2, UnitPrice: 500}}, TotalAmount: 1000, Currency: "JPY", ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001"}},
	events.PaymentCompleted{CustomerID: "c", Amount: 1000, Currency: "JPY", Items: []events.Item{{SKU: "S", Quantity: 2, UnitPrice: 500}}, ShippingAddress: events.Address{Country: "JP"}},
	events.PaymentDeclined{CustomerID: "c", Amount: 1000, Detail: "insufficient_funds"},
	events.PaymentRefunded{CustomerID: "c", Amount: 1000, Reason: events.ReasonOutOfStock},
	events.InventoryReserved{Items: []events.Item{{SKU: "S", Quantity: 2, UnitPrice: 500}}, ShippingAddress: events.Address{Country: "JP"}},
	events.InventoryRejected{Reason: events.ReasonOutOfStock, Shortages: []events.Shortage{{SKU: "S", Requested: 2, Available: 1}}},
	events.InventoryReleased{Items: []events.Item{{SKU: "S", Quantity: 2, UnitPrice: 500}}, Reason: events.ReasonShippingUnavailable},
	events.ShipmentScheduled{Country: "JP"},
	events.ShipmentFailed{Country: "BR", Reason: events.ReasonShippingUnavailable},
}

// TestAddOptionalFieldIsSafe: a field a newer producer adds — to the
// envelope, the payload, or an object inside it — is ignored by this
// consumer, which reads the same envelope and payload as without it. No
// version bump is needed.
func TestAddOptionalFieldIsSafe(t *testing.T) {
	type edit struct{ after, members string }
	type addCase struct {
		name  string
		p     events.Payload
		edits []edit
	}
	tests := []addCase{
		{"NestedObjects", every[0], []edit{
			{`"items":[{`, `"gift_wrap":true`},
			{`"shipping_address":{`, `"geo":{"lat":35.68,"lon":139.76}`},
		}},
	}
	for _, p := range every {
		tests = append(tests, addCase{p.EventType(), p, []edit{
			{`{`, `"trace_hint":"x"`},                             // the envelope
			{`"payload":{`, `"added_in_v1_1":true,"note":[1,{}]`}, // the payload
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := string(mustEncode(t, tt.p))
			extended := plain
			for _, ed := range tt.edits {
				extended = addFields(t, extended, ed.after, ed.members)
			}
			want, wantP, err := events.Decode([]byte(plain))
			if err != nil {
				t.Fatal(err)
			}
			got, gotP, err := events.Decode([]byte(extended))
			if err != nil {
				t.Fatalf("Decode(%s) = %v, want the added fields ignored", extended, err)
			}
			if !reflect.DeepEqual(gotP, wantP) || !reflect.DeepEqual(gotP, tt.p) {
				t.Errorf("payload with added fields %+v, without %+v, sent %+v", gotP, wantP, tt.p)
			}
			// Envelope.Decode, for tools holding an envelope, reads alike.
			into := reflect.New(reflect.TypeOf(tt.p))
			if err := got.Decode(into.Interface().(events.Payload)); err != nil {
				t.Errorf("Envelope.Decode: %v", err)
			} else if !reflect.DeepEqual(into.Elem().Interface(), tt.p) {
				t.Errorf("Envelope.Decode read %+v, sent %+v", into.Elem().Interface(), tt.p)
			}
			got.Payload, want.Payload = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("envelope with added fields %+v, without %+v", got, want)
			}
		})
	}
}

// evolutionCase is one decoding of OrderCreated under a made-up history.
type evolutionCase struct {
	name string
	// upgraded: the consumer has the upcaster, so OrderCreated is at v2;
	// otherwise it is at v1, as every type is today.
	upgraded bool
	value    string
	wantErr  error
	// wantTotal is the decoded total_amount when wantErr is nil.
	wantTotal int64
	// gone is a payload field the decoded envelope must no longer hold.
	gone string
}

// costing5000 prices the one item of a created payload at 5000, the total
// the cases below carry.
func costing5000(payload string) string {
	return strings.Replace(payload, `"unit_price":1`, `"unit_price":5000`, 1)
}

func runEvolution(t *testing.T, up events.Upcaster, tests []evolutionCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := 1
			if tt.upgraded {
				events.SetUpcasters(t, events.TypeOrderCreated, up)
				want = 2
			}
			if got := events.CurrentVersion(events.TypeOrderCreated); got != want {
				t.Fatalf("CurrentVersion = %d, want %d", got, want)
			}
			e, p, err := events.Decode([]byte(tt.value))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decode error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := p.(events.OrderCreated).TotalAmount; got != tt.wantTotal {
				t.Errorf("total_amount = %d, want %d", got, tt.wantTotal)
			}
			// Reactions see the current shape only, envelope included.
			if e.Version != want {
				t.Errorf("decoded envelope has version %d, want the current %d", e.Version, want)
			}
			if tt.gone != "" && strings.Contains(string(e.Payload), `"`+tt.gone+`"`) {
				t.Errorf("decoded payload %s still holds %q", e.Payload, tt.gone)
			}
		})
	}
}

// TestRenameNeedsNewVersionAndUpcaster: say OrderCreated v1 called the
// total "amount" and v2 renamed it "total_amount". Without a new version
// the tolerant reader drops the old name and reads a total of 0 — silently
// wrong, and refused here only because OrderCreated checks its total
// against its items. With v2 and an upcaster, v1 events still in the
// topics read correctly, and a consumer not yet upgraded refuses v2
// instead of misreading it.
func TestRenameNeedsNewVersionAndUpcaster(t *testing.T) {
	v1 := costing5000(created(`"amount":5000`, `"line1":"x"`))
	v2 := costing5000(created(`"total_amount":5000`, `"line1":"x"`))
	runEvolution(t, renameField("amount", "total_amount"), []evolutionCase{
		{name: "RenameWithoutNewVersionIsMisread", value: versioned(1, "OrderCreated", v1), wantErr: events.ErrInvalid},
		{name: "V1IsUpcast", upgraded: true, value: versioned(1, "OrderCreated", v1), wantTotal: 5000, gone: "amount"},
		{name: "V1WithoutVersionIsUpcast", upgraded: true, value: envelope(evolutionID, "OrderCreated", "o", v1), wantTotal: 5000, gone: "amount"},
		{name: "V2IsReadAsIs", upgraded: true, value: versioned(2, "OrderCreated", v2), wantTotal: 5000},
		{name: "V2AtAConsumerNotYetUpgradedIsRefused", value: versioned(2, "OrderCreated", v2), wantErr: events.ErrUnsupportedVersion},
		{name: "UpcastPayloadIsStillValidated", upgraded: true, value: versioned(1, "OrderCreated", created(`"amount":1000000000000001`, `"line1":"x"`)), wantErr: events.ErrInvalid},
		{name: "UpcasterFailureIsInvalid", upgraded: true, value: versioned(1, "OrderCreated", `[1,2]`), wantErr: events.ErrInvalid},
	})
}

// TestRemoveNeedsNewVersionAndUpcaster: say OrderCreated v1 carried a
// "customer_email" that v2 removed (no personal data in the topics).
// Without a new version, a removed field that consumers need dead-letters
// every event (here: no currency). With v2, its upcaster drops the field
// from v1 events, so reactions never see it, and consumers not yet
// upgraded refuse v2 instead of misreading it.
func TestRemoveNeedsNewVersionAndUpcaster(t *testing.T) {
	v1 := costing5000(created(`"total_amount":5000,"customer_email":"c@example.com"`, `"line1":"x"`))
	v2 := costing5000(created(`"total_amount":5000`, `"line1":"x"`))
	noCurrency := strings.Replace(v2, `"currency":"JPY",`, ``, 1)
	runEvolution(t, removeField("customer_email"), []evolutionCase{
		{name: "RemovalOfANeededFieldWithoutNewVersionIsRefused", value: versioned(1, "OrderCreated", noCurrency), wantErr: events.ErrInvalid},
		{name: "V1IsUpcast", upgraded: true, value: versioned(1, "OrderCreated", v1), wantTotal: 5000, gone: "customer_email"},
		{name: "V2IsReadAsIs", upgraded: true, value: versioned(2, "OrderCreated", v2), wantTotal: 5000},
		{name: "V2AtAConsumerNotYetUpgradedIsRefused", value: versioned(2, "OrderCreated", v2), wantErr: events.ErrUnsupportedVersion},
	})
}

// TestNewerVersionIsRefused: a version newer than the consumer knows may
// change what a field means, so it is refused as permanent — dead-lettered
// for replay once the consumer is upgraded — never guessed at.
func TestNewerVersionIsRefused(t *testing.T) {
	v2 := created(`"total_amount":5000`, `"line1":"x"`)
	tests := []struct {
		name     string
		upgraded bool // OrderCreated is at v2
		value    string
	}{
		{"V2AtV1", false, versioned(2, "OrderCreated", v2)},
		{"V3AtV2", true, versioned(3, "OrderCreated", v2)},
		{"FarFuture", false, versioned(1<<30, "ShipmentScheduled", `{"country":"JP"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.upgraded {
				events.SetUpcasters(t, events.TypeOrderCreated, renameField("amount", "total_amount"))
			}
			e, _, err := events.Decode([]byte(tt.value))
			if !errors.Is(err, events.ErrUnsupportedVersion) {
				t.Fatalf("Decode error = %v, want %v", err, events.ErrUnsupportedVersion)
			}
			if !strings.Contains(err.Error(), "newer than version") {
				t.Errorf("error %q does not say the version is newer than the consumer's", err)
			}
			// The same refusal for a tool holding the envelope.
			var p events.Payload = &events.OrderCreated{}
			if e.Type == events.TypeShipmentScheduled {
				p = &events.ShipmentScheduled{}
			}
			if err := e.Decode(p); !errors.Is(err, events.ErrUnsupportedVersion) {
				t.Errorf("Envelope.Decode error = %v, want %v", err, events.ErrUnsupportedVersion)
			}
		})
	}
}

// TestMissingVersionMeansV1: producers that predate versioning send no
// version; their events are read as version 1 (and upcast from there).
// New stamps the current version.
func TestMissingVersionMeansV1(t *testing.T) {
	tests := []struct{ name, value string }{
		{"Absent", envelope(evolutionID, "ShipmentScheduled", "o", `{"country":"JP"}`)},
		{"Null", strings.Replace(envelope(evolutionID, "ShipmentScheduled", "o", `{"country":"JP"}`), `"type"`, `"version":null,"type"`, 1)},
		{"Zero", versioned(0, "ShipmentScheduled", `{"country":"JP"}`)},
		{"One", versioned(1, "ShipmentScheduled", `{"country":"JP"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, p, err := events.Decode([]byte(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if e.Version != 1 || p != (events.ShipmentScheduled{Country: "JP"}) {
				t.Errorf("decoded version %d payload %+v, want 1 {Country:JP}", e.Version, p)
			}
		})
	}
	t.Run("NewStampsTheCurrentVersion", func(t *testing.T) {
		for _, p := range every {
			e, err := events.New("test", "o", p, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			if e.Version != 1 || e.Version != events.CurrentVersion(p.EventType()) {
				t.Errorf("New(%s).Version = %d, want 1, the current version", p.EventType(), e.Version)
			}
			b, _ := e.Encode()
			if !strings.Contains(string(b), `"version":1`) {
				t.Errorf("encoded %s holds no version: %s", p.EventType(), b)
			}
		}
		events.SetUpcasters(t, events.TypeOrderCreated, renameField("amount", "total_amount"))
		if e, _ := events.New("test", "o", every[0], time.Unix(0, 0)); e.Version != 2 {
			t.Errorf("New(OrderCreated) at v2 stamps version %d", e.Version)
		}
	})
}
