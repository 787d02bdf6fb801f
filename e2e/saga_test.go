package e2e

import (
	"net/http"
	"testing"
)

// TestSaga runs one order down each path of the saga and checks the end state
// in all four services: the order's status, the balance, the stock, and each
// service's own record of the order.
func TestSaga(t *testing.T) {
	tests := []struct {
		name            string
		balance, stock  int64
		qty, price      int64
		country         string
		currency        string // "" = JPY, the accounts' currency
		unknownCustomer bool   // order for a customer without an account
		wantStatus      string
		wantReason      string
		wantBalance     int64
		wantAvailable   int64
		wantReserved    int64
		wantPayment     string // "" = no payment record
		wantReservation string // "" = no reservation
		wantShipment    string // "" = no shipment
	}{
		{
			name:    "HappyPathCompletes",
			balance: 10000, stock: 10, qty: 2, price: 2500, country: "JP",
			wantStatus: "COMPLETED", wantBalance: 5000, wantAvailable: 8, wantReserved: 2,
			wantPayment: "COMPLETED", wantReservation: "RESERVED", wantShipment: "SCHEDULED",
		},
		{
			name:    "LowBalanceIsDeclined",
			balance: 4999, stock: 10, qty: 2, price: 2500, country: "JP",
			wantStatus: "CANCELLED", wantReason: "insufficient_funds", wantBalance: 4999, wantAvailable: 10,
			wantPayment: "DECLINED",
		},
		{
			name:    "UnknownCustomerIsDeclined",
			balance: 10000, stock: 10, qty: 2, price: 2500, country: "JP", unknownCustomer: true,
			wantStatus: "CANCELLED", wantReason: "unknown_customer", wantBalance: 10000, wantAvailable: 10,
			wantPayment: "DECLINED",
		},
		{
			name:    "OtherCurrencyIsDeclined",
			balance: 10000, stock: 10, qty: 2, price: 2500, country: "JP", currency: "USD",
			wantStatus: "CANCELLED", wantReason: "currency_mismatch", wantBalance: 10000, wantAvailable: 10,
			wantPayment: "DECLINED",
		},
		{
			name:    "OutOfStockIsRefunded",
			balance: 10000, stock: 1, qty: 2, price: 2500, country: "JP",
			wantStatus: "CANCELLED", wantReason: "out_of_stock", wantBalance: 10000, wantAvailable: 1,
			wantPayment: "REFUNDED", wantReservation: "REJECTED",
		},
		{
			name:    "UnservedCountryIsReleasedAndRefunded",
			balance: 10000, stock: 10, qty: 2, price: 2500, country: "BR",
			wantStatus: "CANCELLED", wantReason: "shipping_unavailable", wantBalance: 10000, wantAvailable: 10,
			wantPayment: "REFUNDED", wantReservation: "RELEASED", wantShipment: "FAILED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.balance, tt.stock)
			req := f.order(tt.qty, tt.price, tt.country)
			if tt.currency != "" {
				req.Currency = tt.currency
			}
			if tt.unknownCustomer {
				req.CustomerID = newID("nobody")
			}
			o := createOrder(t, req)
			assertEqual(t, "new order status", o.Status, "PENDING")
			assertEqual(t, "total", o.TotalAmount, tt.qty*tt.price)

			wantOrder(t, o.ID, tt.wantStatus, tt.wantReason)

			// Terminal means the compensations are already visible elsewhere.
			assertEqual(t, "balance", balance(t, f.customer), tt.wantBalance)
			s := stock(t, f.sku)
			assertEqual(t, "available", s.Available, tt.wantAvailable)
			assertEqual(t, "reserved", s.Reserved, tt.wantReserved)

			var p paymentRecord
			checkRecord(t, "payment", "/payments/"+o.ID, &p, tt.wantPayment, func() string { return p.Status })
			if tt.wantPayment == "COMPLETED" || tt.wantPayment == "REFUNDED" {
				assertEqual(t, "payment amount", p.Amount, tt.qty*tt.price)
			}
			if tt.wantPayment == "DECLINED" {
				// The order says why in payment's own words.
				assertEqual(t, "payment reason", p.Reason, tt.wantReason)
			}
			var r reservation
			checkRecord(t, "inventory", "/reservations/"+o.ID, &r, tt.wantReservation, func() string { return r.Status })
			var sh shipment
			checkRecord(t, "shipping", "/shipments/"+o.ID, &sh, tt.wantShipment, func() string { return sh.Status })
			if tt.wantShipment == "FAILED" {
				assertEqual(t, "shipment reason", sh.Reason, "shipping_unavailable")
			}
		})
	}
}

// checkRecord asserts a service's record of an order: absent (404) when want
// is "", else present with that status.
func checkRecord(t *testing.T, svc, path string, v any, want string, status func() string) {
	t.Helper()
	code := get(t, svc, path, v)
	if want == "" {
		assertEqual(t, svc+" "+path+" HTTP status", code, http.StatusNotFound)
		return
	}
	assertEqual(t, svc+" "+path+" HTTP status", code, http.StatusOK)
	assertEqual(t, svc+" record status", status(), want)
}

// TestMultiItemOrderReservesEveryLine checks that an order with several
// lines (one SKU twice) reserves the summed quantity, and that one short line
// rejects the whole order without reserving the others.
func TestMultiItemOrderReservesEveryLine(t *testing.T) {
	f := newFixture(t, 100000, 5)
	other := newID("SKU")
	putStock(t, other, 3)
	req := f.order(2, 1000, "US")
	req.Items = append(req.Items, item{SKU: f.sku, Quantity: 1, UnitPrice: 1000}, item{SKU: other, Quantity: 3, UnitPrice: 500})
	o := createOrder(t, req)
	wantOrder(t, o.ID, "COMPLETED", "")
	assertEqual(t, "balance", balance(t, f.customer), 100000-4500)
	assertEqual(t, "sku1 available", stock(t, f.sku).Available, 2)
	assertEqual(t, "sku2 available", stock(t, other).Available, 0)

	// Now other is empty: a second order asking for both is rejected whole.
	o2 := createOrder(t, req)
	wantOrder(t, o2.ID, "CANCELLED", "out_of_stock")
	assertEqual(t, "sku1 untouched", stock(t, f.sku), stockLevel{SKU: f.sku, Available: 2, Reserved: 3})
	assertEqual(t, "balance refunded", balance(t, f.customer), 100000-4500)
}
