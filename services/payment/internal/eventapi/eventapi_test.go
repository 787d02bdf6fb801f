package eventapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/payment/internal/domain"
	"github.com/choreo-saga/choreo/services/payment/internal/store"
)

// The runtime's guarantees (redelivery, concurrent deliveries, dead
// letters, other services' events, one transaction) are checked by the
// conformance suite in payment_test; these tests pin what the payment
// service decides and emits.

// fixture is one test's view of the service: its reactions on a database
// of their own (testenv.Reactions) and its store.
type fixture struct {
	*testenv.Reactions
	t  *testing.T
	st *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := testenv.NewReactions(t, payment.Spec, payment.DefaultConfig())
	return &fixture{Reactions: r, t: t, st: store.New(r.DB)}
}

// customer opens an account with balance in JPY and returns its id.
func (f *fixture) customer(balance int64) string {
	f.t.Helper()
	return f.customerIn(balance, "JPY")
}

// customerIn opens an account with balance in currency and returns its id.
func (f *fixture) customerIn(balance int64, currency string) string {
	f.t.Helper()
	id := testenv.ID("c")
	if _, err := f.st.PutAccount(context.Background(), id, balance, currency, store.Precondition{CreateOnly: true}); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// order returns a fresh order id.
func (f *fixture) order() string { return uuid.NewString() }

// items returns two order lines whose total is amount.
func items(amount int64) []events.Item {
	return []events.Item{{SKU: "sku-a", Quantity: 1, UnitPrice: amount - amount/2}, {SKU: "sku-b", Quantity: 1, UnitPrice: amount / 2}}
}

// created is the order service's OrderCreated for amount.
func (f *fixture) created(orderID, customerID string, amount int64) events.Envelope {
	return f.Event(orderID, events.OrderCreated{
		CustomerID: customerID, Items: items(amount), TotalAmount: amount, Currency: "JPY", ShippingAddress: testenv.Address,
	})
}

func (f *fixture) rejected(orderID string) events.Envelope {
	return f.Event(orderID, events.InventoryRejected{
		Reason: events.ReasonOutOfStock, Shortages: []events.Shortage{{SKU: "sku-a", Requested: 1, Available: 0}},
	})
}

func (f *fixture) released(orderID string) events.Envelope {
	return f.Event(orderID, events.InventoryReleased{Items: items(1000), Reason: events.ReasonShippingUnavailable})
}

func (f *fixture) mustBalance(customerID string, want int64) {
	f.t.Helper()
	a, err := f.st.Account(context.Background(), customerID)
	if err != nil {
		f.t.Fatalf("account %s: %v", customerID, err)
	}
	if a.Balance != want {
		f.t.Fatalf("balance of %s = %d, want %d", customerID, a.Balance, want)
	}
}

// payment returns the order's payment record and its detail column.
func (f *fixture) payment(orderID string) (domain.Payment, string) {
	f.t.Helper()
	p, err := f.st.Payment(context.Background(), orderID)
	if err != nil {
		f.t.Fatalf("payment %s: %v", orderID, err)
	}
	var detail string
	if err := f.DB.Get(&detail, `SELECT detail FROM payments WHERE order_id = $1`, orderID); err != nil {
		f.t.Fatal(err)
	}
	return p, detail
}

// noPayment fails the test if the order has a payment record.
func (f *fixture) noPayment(orderID string) {
	f.t.Helper()
	if p, err := f.st.Payment(context.Background(), orderID); !errors.Is(err, fault.NotFound) {
		f.t.Fatalf("payment of %s = %+v, %v; want fault.NotFound", orderID, p, err)
	}
}

// types returns the event types of envs, in order.
func types(envs []events.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.Type
	}
	return out
}

func TestCharge(t *testing.T) {
	tests := []struct {
		name        string
		account     string // the currency of the customer's account; "" for none
		balance     int64
		amount      int64
		wantStatus  domain.Status
		wantBalance int64
		wantDetail  string // of a decline
	}{
		{"EnoughBalanceDebits", "JPY", 10000, 2500, domain.StatusCompleted, 7500, ""},
		{"ExactBalanceDebits", "JPY", 2500, 2500, domain.StatusCompleted, 0, ""},
		{"LowBalanceDeclines", "JPY", 2499, 2500, domain.StatusDeclined, 2499, domain.DeclineInsufficientFunds},
		{"UnknownCustomerDeclines", "", 0, 2500, domain.StatusDeclined, 0, domain.DeclineUnknownCustomer},
		{"OtherCurrencyDeclines", "USD", 10000, 2500, domain.StatusDeclined, 10000, domain.DeclineCurrencyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cust := testenv.ID("c")
			if tt.account != "" {
				cust = f.customerIn(tt.balance, tt.account)
			}
			id := f.order()
			e := f.created(id, cust, tt.amount)

			f.MustDeliver(e)

			if tt.account != "" {
				f.mustBalance(cust, tt.wantBalance)
			} else if _, err := f.st.Account(context.Background(), cust); !errors.Is(err, fault.NotFound) {
				t.Fatalf("unknown customer's account: err = %v, want fault.NotFound (a decline opens no account)", err)
			}
			p, detail := f.payment(id)
			want := domain.Payment{OrderID: id, CustomerID: cust, Amount: tt.amount, Currency: "JPY", Status: tt.wantStatus}
			if p != want || detail != tt.wantDetail {
				t.Fatalf("payment = %+v detail %q, want %+v detail %q", p, detail, want, tt.wantDetail)
			}
			if n := f.Processed(e.ID); n != 1 {
				t.Fatalf("processed_events rows for the OrderCreated = %d, want 1", n)
			}

			out := f.Emitted(id)
			if tt.wantStatus == domain.StatusCompleted {
				got := testenv.Last[events.PaymentCompleted](t, out, 1)
				want := events.PaymentCompleted{CustomerID: cust, Amount: tt.amount, Currency: "JPY", Items: items(tt.amount), ShippingAddress: testenv.Address}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("PaymentCompleted = %+v, want %+v (the order's items and address)", got, want)
				}
				return
			}
			got := testenv.Last[events.PaymentDeclined](t, out, 1)
			if want := (events.PaymentDeclined{CustomerID: cust, Amount: tt.amount, Detail: tt.wantDetail}); got != want {
				t.Fatalf("PaymentDeclined = %+v, want %+v", got, want)
			}
		})
	}
}

// compensation is an event that refunds a charge, with the reason its
// refund gives and the other compensation, which must not refund again.
type compensation struct {
	name       string
	compensate func(f *fixture, orderID string) events.Envelope
	other      func(f *fixture, orderID string) events.Envelope
	wantReason string
}

// eachCompensation runs test once for each compensation, in a subtest of
// its name, on a fixture of its own with a customer holding 10000 JPY and
// a fresh order id.
func eachCompensation(t *testing.T, test func(t *testing.T, f *fixture, tt compensation, cust, id string)) {
	for _, tt := range []compensation{
		{"InventoryRejected", (*fixture).rejected, (*fixture).released, events.ReasonOutOfStock},
		{"InventoryReleased", (*fixture).released, (*fixture).rejected, events.ReasonShippingUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			test(t, f, tt, f.customer(10000), f.order())
		})
	}
}

func TestRefundCreditsTheCharge(t *testing.T) {
	eachCompensation(t, func(t *testing.T, f *fixture, tt compensation, cust, id string) {
		f.MustDeliver(f.created(id, cust, 2500))
		f.mustBalance(cust, 7500)

		f.MustDeliver(tt.compensate(f, id))

		f.mustBalance(cust, 10000)
		p, detail := f.payment(id)
		want := domain.Payment{OrderID: id, CustomerID: cust, Amount: 2500, Currency: "JPY", Status: domain.StatusRefunded}
		if p != want || detail != tt.wantReason {
			t.Fatalf("payment = %+v detail %q, want %+v detail %q", p, detail, want, tt.wantReason)
		}
		out := f.Emitted(id)
		if got := types(out); !reflect.DeepEqual(got, []string{events.TypePaymentCompleted, events.TypePaymentRefunded}) {
			t.Fatalf("emitted %v, want PaymentCompleted then PaymentRefunded", got)
		}
		var refunded events.PaymentRefunded
		testenv.Payload(t, out[1], &refunded)
		if w := (events.PaymentRefunded{CustomerID: cust, Amount: 2500, Reason: tt.wantReason}); refunded != w {
			t.Fatalf("PaymentRefunded = %+v, want %+v", refunded, w)
		}

		t.Run("SecondRefundIsNoop", func(t *testing.T) {
			// Another event id passes de-duplication; the REFUNDED
			// record makes the domain skip.
			for _, e := range []events.Envelope{tt.compensate(f, id), tt.other(f, id)} {
				f.MustDeliver(e)
				if n := f.Processed(e.ID); n != 1 {
					t.Fatalf("processed_events rows for the second refund = %d, want 1", n)
				}
			}
			f.mustBalance(cust, 10000)
			if n := len(f.Emitted(id)); n != 2 {
				t.Fatalf("%d events after a second refund, want still 2", n)
			}
			if p, _ := f.payment(id); p.Status != domain.StatusRefunded || p.Amount != 2500 {
				t.Fatalf("payment = %+v, want REFUNDED 2500", p)
			}
		})
	})
}

func TestRefundOfDeclinedPaymentIsNoop(t *testing.T) {
	f := newFixture(t)
	cust := f.customer(100)
	id := f.order()
	f.MustDeliver(f.created(id, cust, 2500))
	f.MustDeliver(f.rejected(id))

	f.mustBalance(cust, 100)
	if p, _ := f.payment(id); p.Status != domain.StatusDeclined {
		t.Fatalf("status = %s, want DECLINED", p.Status)
	}
	if got := types(f.Emitted(id)); !reflect.DeepEqual(got, []string{events.TypePaymentDeclined}) {
		t.Fatalf("emitted %v, want only the PaymentDeclined", got)
	}
}

// TestRefundNeverCreditsAnotherCurrency: an account's currency cannot
// change through the API, but if the row says otherwise (edited by hand)
// or is gone, a refund is refused as permanent — dead-lettered for an
// operator — rather than credit the amount charged in yen as dollars.
func TestRefundNeverCreditsAnotherCurrency(t *testing.T) {
	tests := []struct {
		name   string
		tamper string // run on the charged account, $1 its customer id
	}{
		{"CurrencyEditedByHand", `UPDATE accounts SET currency = 'USD' WHERE customer_id = $1`},
		{"AccountDeletedByHand", `DELETE FROM accounts WHERE customer_id = $1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cust := f.customer(10000)
			id := f.order()
			f.MustDeliver(f.created(id, cust, 2500))
			if _, err := f.DB.Exec(tt.tamper, cust); err != nil {
				t.Fatal(err)
			}
			var before []byte
			if err := f.DB.Get(&before, `SELECT convert_to(coalesce((SELECT row_to_json(a)::text FROM accounts a WHERE customer_id = $1), ''), 'UTF8')`, cust); err != nil {
				t.Fatal(err)
			}

			refund := f.rejected(id)
			if err := f.Deliver(refund); !consumer.IsPermanent(err) {
				t.Fatalf("refund: err = %v, want a permanent error", err)
			}
			var after []byte
			if err := f.DB.Get(&after, `SELECT convert_to(coalesce((SELECT row_to_json(a)::text FROM accounts a WHERE customer_id = $1), ''), 'UTF8')`, cust); err != nil {
				t.Fatal(err)
			}
			if string(after) != string(before) {
				t.Fatalf("account changed by a refused refund: %s → %s", before, after)
			}
			if p, _ := f.payment(id); p.Status != domain.StatusCompleted {
				t.Fatalf("status = %s, want still COMPLETED", p.Status)
			}
			if got := types(f.Emitted(id)); !reflect.DeepEqual(got, []string{events.TypePaymentCompleted}) {
				t.Fatalf("emitted %v, want only the PaymentCompleted", got)
			}
			if n := f.Processed(refund.ID); n != 0 {
				t.Fatalf("refused refund marked processed %d times, want 0", n)
			}
		})
	}
}

// TestRefundBeforeChargeLeavesTombstone delivers the compensation before the
// OrderCreated it compensates, as a redelivery after a rebalance can: the
// saga still ends, and the late charge takes no money.
func TestRefundBeforeChargeLeavesTombstone(t *testing.T) {
	eachCompensation(t, func(t *testing.T, f *fixture, tt compensation, cust, id string) {

		f.MustDeliver(tt.compensate(f, id))

		p, detail := f.payment(id)
		if want := (domain.Payment{OrderID: id, Status: domain.StatusRefunded}); p != want || detail == "" {
			t.Fatalf("payment = %+v detail %q, want a REFUNDED tombstone of amount 0 that says why", p, detail)
		}
		refunded := testenv.Last[events.PaymentRefunded](t, f.Emitted(id), 1)
		if want := (events.PaymentRefunded{Amount: 0, Reason: tt.wantReason}); refunded != want {
			t.Fatalf("PaymentRefunded = %+v, want %+v", refunded, want)
		}

		t.Run("LateChargeIsNoop", func(t *testing.T) {
			late := f.created(id, cust, 2500)
			f.MustDeliver(late)
			f.mustBalance(cust, 10000)
			if n := len(f.Emitted(id)); n != 1 {
				t.Fatalf("%d events after the late charge, want still 1", n)
			}
			if p, _ := f.payment(id); p.Status != domain.StatusRefunded || p.Amount != 0 {
				t.Fatalf("payment = %+v, want the REFUNDED tombstone", p)
			}
			if n := f.Processed(late.ID); n != 1 {
				t.Fatalf("processed_events rows for the late charge = %d, want 1", n)
			}
		})
	})
}

// TestConcurrentOrdersNeverOverdraw charges one customer for several orders
// at once whose sum exceeds the balance: the account's row lock serialises
// the charges, so exactly as many succeed as the balance covers.
func TestConcurrentOrdersNeverOverdraw(t *testing.T) {
	tests := []struct {
		name          string
		balance       int64
		orders        int
		amount        int64
		wantCompleted int
	}{
		{"TwoOrdersOneFits", 5000, 2, 3000, 1},
		{"TenOrdersThreeFit", 3500, 10, 1000, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cust := f.customer(tt.balance)
			ids := make([]string, tt.orders)
			envs := make([]events.Envelope, tt.orders)
			for i := range ids {
				ids[i] = f.order()
				envs[i] = f.created(ids[i], cust, tt.amount)
			}

			f.DeliverAll(envs...)

			f.mustBalance(cust, tt.balance-int64(tt.wantCompleted)*tt.amount)
			count := map[domain.Status]int{}
			for _, id := range ids {
				p, detail := f.payment(id)
				count[p.Status]++
				wantType := events.TypePaymentCompleted
				if p.Status == domain.StatusDeclined {
					wantType = events.TypePaymentDeclined
					if detail != domain.DeclineInsufficientFunds {
						t.Errorf("order %s declined with %q, want %q", id, detail, domain.DeclineInsufficientFunds)
					}
				}
				if got := types(f.Emitted(id)); !reflect.DeepEqual(got, []string{wantType}) {
					t.Errorf("order %s (%s) emitted %v, want [%s]", id, p.Status, got, wantType)
				}
			}
			if count[domain.StatusCompleted] != tt.wantCompleted || count[domain.StatusDeclined] != tt.orders-tt.wantCompleted {
				t.Fatalf("outcomes %v, want %d COMPLETED and %d DECLINED", count, tt.wantCompleted, tt.orders-tt.wantCompleted)
			}
		})
	}
}

// TestInvalidPayloadsAreRefused pins which payloads of the events payment
// consumes are refused before a reaction runs: permanent, no payment, no
// event, no mark, no money moved. That such a refusal is dead-lettered is
// the conformance suite's InvalidPayloadIsDeadLettered; these are the
// payload rules it does not enumerate.
func TestInvalidPayloadsAreRefused(t *testing.T) {
	f := newFixture(t)
	cust := f.customer(10000)
	tests := []struct {
		name    string
		typ     string
		payload string
		reason  string // in the error the dead letter records, if not ""
	}{
		// The client sets the prices, so payment checks the total it is
		// about to charge against the items inventory will reserve.
		{"OrderCreatedWhoseTotalIsNotItsItems", events.TypeOrderCreated, `{"customer_id":"` + cust + `","items":[{"sku":"a","quantity":2,"unit_price":500}],"total_amount":1,"currency":"JPY","shipping_address":{"country":"JP"}}`,
			"total_amount 1 is not the sum of the items' quantity × unit_price, 1000"},
		{"OrderCreatedWithoutItems", events.TypeOrderCreated, `{"customer_id":"` + cust + `","items":[],"total_amount":1,"currency":"JPY","shipping_address":{"country":"JP"}}`, ""},
		{"OrderCreatedWithNegativeTotal", events.TypeOrderCreated, `{"customer_id":"` + cust + `","items":[{"sku":"a","quantity":1,"unit_price":1}],"total_amount":-1,"currency":"JPY","shipping_address":{"country":"JP"}}`, ""},
		{"OrderCreatedWithWronglyTypedTotal", events.TypeOrderCreated, `{"customer_id":"` + cust + `","items":[{"sku":"a","quantity":1,"unit_price":1}],"total_amount":"1","currency":"JPY","shipping_address":{"country":"JP"}}`, ""},
		{"InventoryRejectedWithOtherReason", events.TypeInventoryRejected, `{"reason":"bored","shortages":[]}`, ""},
		{"InventoryReleasedWithoutReason", events.TypeInventoryReleased, `{"items":[]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := f.order()
			e := events.Envelope{
				ID: uuid.NewString(), Type: tt.typ, OrderID: id, Source: "test",
				OccurredAt: time.Now(), Payload: json.RawMessage(tt.payload),
			}
			err := f.Deliver(e)
			if !consumer.IsPermanent(err) {
				t.Fatalf("deliver = %v, want a permanent error", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("deliver = %v, want the reason %q", err, tt.reason)
			}
			f.noPayment(id)
			if n := len(f.Emitted(id)); n != 0 {
				t.Fatalf("%d events, want 0", n)
			}
			if n := f.Processed(e.ID); n != 0 {
				t.Fatalf("processed_events rows = %d, want 0: a dead-lettered event was never applied", n)
			}
		})
	}
	f.mustBalance(cust, 10000)

	t.Run("UndecodableMessage", func(t *testing.T) {
		err := f.Handler.Handle(context.Background(), &sarama.ConsumerMessage{Topic: events.TopicOrder, Value: []byte(`{not json`)})
		if !consumer.IsPermanent(err) {
			t.Fatalf("Handle = %v, want a permanent error", err)
		}
	})
}

// cancelAcks returns the PaymentCancelled events queued for the order.
func (f *fixture) cancelAcks(orderID string) []events.PaymentCancelled {
	f.t.Helper()
	return testenv.Payloads[events.PaymentCancelled](f.t, f.Emitted(orderID))
}

// TestCancel: the order's cancel undoes the charge whatever step the saga
// reached, acknowledges once with what it credited, and never credits
// twice — neither a second cancel request nor a compensation's refund
// around it.
func TestCancel(t *testing.T) {
	tests := []struct {
		name        string
		before      func(f *fixture, orderID, customer string) // what happened before the cancel
		after       func(f *fixture, orderID, customer string) // what arrives after it
		wantBalance int64
		wantStatus  domain.Status
		wantAck     int64 // the amount PaymentCancelled reports
	}{
		{"ChargedIsCreditedBack", func(f *fixture, o, c string) { f.MustDeliver(f.created(o, c, 3000)) }, nil,
			10000, domain.StatusRefunded, 3000},
		{"DeclinedIsOnlyAcknowledged", func(f *fixture, o, c string) { f.MustDeliver(f.created(o, c, 30000)) }, nil,
			10000, domain.StatusDeclined, 0},
		{"CancelBeforeChargeLeavesTombstone", nil, func(f *fixture, o, c string) { f.MustDeliver(f.created(o, c, 3000)) },
			10000, domain.StatusRefunded, 0},
		{"RefundThenCancelCreditsOnce", func(f *fixture, o, c string) {
			f.MustDeliver(f.created(o, c, 3000))
			f.MustDeliver(f.rejected(o))
		}, nil, 10000, domain.StatusRefunded, 0},
		{"CancelThenRefundCreditsOnce", func(f *fixture, o, c string) { f.MustDeliver(f.created(o, c, 3000)) },
			func(f *fixture, o, c string) { f.MustDeliver(f.released(o)) }, 10000, domain.StatusRefunded, 3000},
		{"SecondCancelRequestChangesNothing", func(f *fixture, o, c string) { f.MustDeliver(f.created(o, c, 3000)) },
			func(f *fixture, o, c string) { f.MustDeliver(testenv.CancelRequested(f.t, o)) }, 10000, domain.StatusRefunded, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c, o := f.customer(10000), f.order()
			if tt.before != nil {
				tt.before(f, o, c)
			}
			f.MustDeliver(testenv.CancelRequested(f.t, o))
			if tt.after != nil {
				tt.after(f, o, c)
			}
			f.mustBalance(c, tt.wantBalance)
			if p, _ := f.payment(o); p.Status != tt.wantStatus {
				t.Fatalf("payment = %+v, want %s", p, tt.wantStatus)
			}
			acks := f.cancelAcks(o)
			if len(acks) != 1 || acks[0].Amount != tt.wantAck {
				t.Fatalf("PaymentCancelled = %+v, want one with amount %d", acks, tt.wantAck)
			}
			// A refund never follows the cancel: the order ends on the ack.
			for _, typ := range types(f.Emitted(o)) {
				if typ == events.TypePaymentRefunded && tt.name != "RefundThenCancelCreditsOnce" {
					t.Fatalf("emitted %v: a PaymentRefunded besides the cancel", types(f.Emitted(o)))
				}
			}
		})
	}
}

// TestCancelAndRefundRacing delivers a compensation's refund and the
// cancel at the same moment, as two partitions would: the charge is
// credited once.
func TestCancelAndRefundRacing(t *testing.T) {
	for range 5 {
		f := newFixture(t)
		c, o := f.customer(10000), f.order()
		f.MustDeliver(f.created(o, c, 3000))
		f.DeliverAll(f.released(o), testenv.CancelRequested(f.t, o))
		f.mustBalance(c, 10000)
		if acks := f.cancelAcks(o); len(acks) != 1 {
			t.Fatalf("PaymentCancelled = %+v, want one", acks)
		}
	}
}
