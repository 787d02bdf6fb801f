package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/choreo-saga/choreo/internal/workload"
)

// fixture is a small consistent world: one happy order completed and one
// out-of-stock order compensated, which the tests then break one way each.
func fixture() (Expectation, Snapshot) {
	exp := Expectation{
		Requests: map[string]Request{
			"k1": {Order: workload.Order{Key: "k1", Kind: workload.Happy, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 2, UnitPrice: 100}}}},
			"k2": {Order: workload.Order{Key: "k2", Kind: workload.OutOfStock, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 1, UnitPrice: 100}, {SKU: "X1", Quantity: 1, UnitPrice: 100}}}},
		},
		Accepted:       map[string][]string{"k1": {"o1"}, "k2": {"o2", "o2"}},
		InitialBalance: map[string]int64{"c1": 1000},
		InitialStock:   map[string]int64{"S1": 10, "X1": 0},
		Planned:        2,
	}
	snap := Snapshot{
		Orders: map[string]*OrderView{
			"o1": {ID: "o1", CustomerID: "c1", TotalAmount: 200, Status: "COMPLETED"},
			"o2": {ID: "o2", CustomerID: "c1", TotalAmount: 200, Status: "CANCELLED", CancelReason: "out_of_stock"},
		},
		Payments: map[string]*PaymentView{
			"o1": {OrderID: "o1", CustomerID: "c1", Amount: 200, Status: "COMPLETED"},
			"o2": {OrderID: "o2", CustomerID: "c1", Amount: 200, Status: "REFUNDED"},
		},
		Reservations: map[string]*ReservationView{
			"o1": {OrderID: "o1", Status: "RESERVED", Items: []workload.Item{{SKU: "S1", Quantity: 2}}},
			"o2": {OrderID: "o2", Status: "REJECTED"},
		},
		Shipments: map[string]*ShipmentView{"o1": {OrderID: "o1", Status: "SCHEDULED"}},
		Balances:  map[string]int64{"c1": 800},
		Stock:     map[string]StockView{"S1": {Available: 8, Reserved: 2}, "X1": {}},
		Rest:      Rest{Reached: true},
	}
	earlier := cloneSnapshot(snap)
	snap.Earlier = &earlier
	return exp, snap
}

// cloneSnapshot copies s deeply, as a second read of the same state.
func cloneSnapshot(s Snapshot) Snapshot {
	c := Snapshot{Orders: map[string]*OrderView{}, Payments: map[string]*PaymentView{}, Reservations: map[string]*ReservationView{},
		Shipments: map[string]*ShipmentView{}, Balances: maps.Clone(s.Balances), Stock: maps.Clone(s.Stock), Rest: s.Rest}
	for k, v := range s.Orders {
		x := *v
		c.Orders[k] = &x
	}
	for k, v := range s.Payments {
		x := *v
		c.Payments[k] = &x
	}
	for k, v := range s.Reservations {
		x := *v
		x.Items = slices.Clone(v.Items)
		c.Reservations[k] = &x
	}
	for k, v := range s.Shipments {
		x := *v
		c.Shipments[k] = &x
	}
	return c
}

func TestCheckConsistent(t *testing.T) {
	exp, snap := fixture()
	v := Check(exp, snap)
	if !v.OK() || v.Terminal != 2 || v.Total != 2 {
		t.Fatalf("a consistent world: %+v", v)
	}
}

func TestCheckFlags(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(*Expectation, *Snapshot)
		class  string // lost, doubled, inconsistent
		what   string
	}{
		{"pending order", func(_ *Expectation, s *Snapshot) { s.Orders["o1"].Status = "PENDING" }, "lost", "not-terminal"},
		{"missing order", func(_ *Expectation, s *Snapshot) { delete(s.Orders, "o2") }, "lost", "order-missing"},
		{"two orders for one key", func(e *Expectation, s *Snapshot) {
			e.Accepted["k1"] = []string{"o1", "o3"}
			s.Orders["o3"] = &OrderView{ID: "o3", CustomerID: "c1", TotalAmount: 200, Status: "CANCELLED", CancelReason: "insufficient_funds"}
			s.Payments["o3"] = &PaymentView{OrderID: "o3", CustomerID: "c1", Amount: 200, Status: "DECLINED"}
		}, "doubled", "idempotency-key"},
		{"debited twice", func(_ *Expectation, s *Snapshot) { s.Balances["c1"] = 600 }, "doubled", "money"},
		{"refunded twice", func(_ *Expectation, s *Snapshot) { s.Balances["c1"] = 1000 }, "doubled", "money"},
		{"reserved twice", func(_ *Expectation, s *Snapshot) { s.Stock["S1"] = StockView{Available: 6, Reserved: 4} }, "doubled", "stock-reserved"},
		{"released twice", func(_ *Expectation, s *Snapshot) { s.Stock["S1"] = StockView{Available: 9, Reserved: 2} }, "doubled", "stock"},
		{"completed without shipment", func(_ *Expectation, s *Snapshot) { delete(s.Shipments, "o1") }, "inconsistent", "cross-service"},
		{"cancelled with payment kept", func(_ *Expectation, s *Snapshot) {
			s.Payments["o2"].Status = "COMPLETED"
			s.Balances["c1"] = 600 // the money agrees with the payments; the order does not
		}, "inconsistent", "cross-service"},
		{"cancelled with stock kept", func(_ *Expectation, s *Snapshot) {
			s.Reservations["o2"] = &ReservationView{OrderID: "o2", Status: "RESERVED", Items: []workload.Item{{SKU: "S1", Quantity: 1}}}
			s.Stock["S1"] = StockView{Available: 7, Reserved: 3}
		}, "inconsistent", "cross-service"},
		{"happy order cancelled", func(_ *Expectation, s *Snapshot) {
			s.Orders["o1"] = &OrderView{ID: "o1", CustomerID: "c1", TotalAmount: 200, Status: "CANCELLED", CancelReason: "shipping_unavailable"}
			s.Payments["o1"].Status = "REFUNDED"
			s.Reservations["o1"].Status = "RELEASED"
			s.Shipments["o1"].Status = "FAILED"
			s.Balances["c1"] = 1000
			s.Stock["S1"] = StockView{Available: 10}
		}, "inconsistent", "unexpected-outcome"},
		{"replay refused", func(e *Expectation, _ *Snapshot) {
			e.ReplayRefused = map[string]string{"k1": "HTTP 422"}
		}, "inconsistent", "idempotency-replay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp, snap := fixture()
			tt.break_(&exp, &snap)
			v := Check(exp, snap)
			if v.OK() {
				t.Fatalf("not flagged: %+v", v)
			}
			found := false
			for _, x := range v.Violations {
				if x.Class == tt.class && x.What == tt.what {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a %s/%s violation, got %+v", tt.class, tt.what, v.Violations)
			}
			counts := map[string]int{"lost": v.Lost, "doubled": v.Doubled, "inconsistent": v.Inconsistent}
			if counts[tt.class] == 0 {
				t.Fatalf("%s count is 0: %+v", tt.class, v)
			}
		})
	}
}

// TestCheckNeedsEvidence: a run in which the checker saw too little, or
// trusted a service's own records where the client knows better, must not
// pass. Each case is a world the services could show while a guarantee is
// broken, or while nothing was proven.
func TestCheckNeedsEvidence(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(*Expectation, *Snapshot)
		class  string
		what   string
	}{
		{"NoOrders", func(e *Expectation, s *Snapshot) {
			e.Requests, e.Accepted, e.Planned = map[string]Request{}, map[string][]string{}, 0
			*s = Snapshot{Balances: s.Balances, Stock: map[string]StockView{"S1": {Available: 10}, "X1": {}}}
			s.Balances["c1"] = 1000
		}, "unproven", "no-orders"},
		{"AllRefused", func(e *Expectation, s *Snapshot) {
			e.Accepted = map[string][]string{}
			e.Refused = map[string]string{"k1": "HTTP 409: busy", "k2": "HTTP 422: no"}
			*s = Snapshot{Balances: map[string]int64{"c1": 1000}, Stock: map[string]StockView{"S1": {Available: 10}, "X1": {}}}
		}, "unproven", "refused"},
		{"AllUnsettled", func(e *Expectation, s *Snapshot) {
			e.Accepted = map[string][]string{}
			e.Unsettled = []string{"k1", "k2"}
			*s = Snapshot{Balances: map[string]int64{"c1": 1000}, Stock: map[string]StockView{"S1": {Available: 10}, "X1": {}}}
		}, "unproven", "unsettled"},
		{"OneRefusedOverABudgetOfNone", func(e *Expectation, _ *Snapshot) {
			e.Requests["k3"] = Request{Order: workload.Order{Key: "k3", Kind: workload.Unserved, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 1, UnitPrice: 100}}}}
			e.Refused = map[string]string{"k3": "HTTP 400: country"}
			e.Planned = 3
		}, "unproven", "refused"},
		{"PlannedNotSent", func(e *Expectation, _ *Snapshot) { e.Planned = 5 }, "unproven", "not-sent"},
		{"CustomerOutsideTheWorld", func(e *Expectation, s *Snapshot) {
			// charged twice, but nobody would look at its balance
			delete(e.InitialBalance, "c1")
			s.Balances["c1"] = 600
		}, "unproven", "not-in-world"},
		{"SKUOutsideTheWorld", func(e *Expectation, _ *Snapshot) { delete(e.InitialStock, "S1") }, "unproven", "not-in-world"},
		{"DoubledReservationRecordedConsistently", func(_ *Expectation, s *Snapshot) {
			// inventory reserved 4 of S1 for an order of 2, and its records
			// agree with themselves: only the request says otherwise.
			s.Reservations["o1"].Items[0].Quantity = 4
			s.Stock["S1"] = StockView{Available: 6, Reserved: 4}
		}, "doubled", "stock-reserved"},
		{"ReservationItemsNotTheRequests", func(_ *Expectation, s *Snapshot) {
			s.Reservations["o1"].Items[0].Quantity = 4
		}, "inconsistent", "reservation-items"},
		{"ChargedTheOrdersTotalNotTheClients", func(_ *Expectation, s *Snapshot) {
			// order and payment agree on 400 for a request of 2×100.
			s.Orders["o1"].TotalAmount = 400
			s.Payments["o1"].Amount = 400
			s.Balances["c1"] = 600
		}, "doubled", "money"},
		{"OrderOfAnotherCustomer", func(_ *Expectation, s *Snapshot) {
			s.Orders["o1"].CustomerID = "c2"
			s.Payments["o1"].CustomerID = "c2"
		}, "inconsistent", "client-request"},
		{"UnsettledKeyDoesNotHideADoubleDebit", func(e *Expectation, s *Snapshot) {
			// k3 (100) may have been charged once; c1 lost 300 more.
			e.Requests["k3"] = Request{Order: workload.Order{Key: "k3", Kind: workload.Happy, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 1, UnitPrice: 100}}}}
			e.Unsettled, e.Budget.Unsettled, e.Planned = []string{"k3"}, 1, 3
			s.Balances["c1"] = 500
		}, "doubled", "money"},
		{"LateDuplicateAfterTheFirstRead", func(_ *Expectation, s *Snapshot) {
			// the first read was consistent; a redelivery debited c1 again
			// before the second.
			s.Balances["c1"] = 600
		}, "unproven", "moved-after-read"},
		{"OnlyTheFirstReadBroken", func(_ *Expectation, s *Snapshot) {
			// the checks judge the later read; an earlier one that differs
			// is a system still moving.
			s.Earlier.Balances["c1"] = 600
		}, "unproven", "moved-after-read"},
		{"ReadOnce", func(_ *Expectation, s *Snapshot) { s.Earlier = nil }, "unproven", "one-read"},
		{"NotAtRest", func(_ *Expectation, s *Snapshot) {
			s.Rest = Rest{Outbox: map[string]int{"payment": 0}, Lag: map[string]int64{"inventory": 3}, Err: "not at rest after 30s"}
		}, "unproven", "not-at-rest"},
		{"UnsettledKeyDoesNotHideADoubleReservation", func(e *Expectation, s *Snapshot) {
			e.Requests["k3"] = Request{Order: workload.Order{Key: "k3", Kind: workload.Happy, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 1, UnitPrice: 100}}}}
			e.Unsettled, e.Budget.Unsettled, e.Planned = []string{"k3"}, 1, 3
			s.Stock["S1"] = StockView{Available: 5, Reserved: 5}
		}, "doubled", "stock-reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp, snap := fixture()
			tt.break_(&exp, &snap)
			v := Check(exp, snap)
			if v.OK() {
				t.Fatalf("passed: %+v", v)
			}
			for _, x := range v.Violations {
				if x.Class == tt.class && x.What == tt.what {
					return
				}
			}
			t.Fatalf("want a %s/%s violation, got %+v", tt.class, tt.what, v.Violations)
		})
	}
}

// TestCheckBoundsUnsettled: a key never answered may have made one order
// with all its effects, or none; within the budget, either passes, and
// the customer and SKUs it touches are still checked, within bounds.
func TestCheckBoundsUnsettled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		balance int64
		stock   StockView
	}{
		{"NoEffect", 800, StockView{Available: 8, Reserved: 2}},
		{"CompletedOnce", 700, StockView{Available: 7, Reserved: 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp, snap := fixture()
			exp.Requests["k3"] = Request{Order: workload.Order{Key: "k3", Kind: workload.Happy, Customer: "c1", Items: []workload.Item{{SKU: "S1", Quantity: 1, UnitPrice: 100}}}}
			exp.Unsettled, exp.Budget.Unsettled, exp.Planned = []string{"k3"}, 1, 3
			snap.Balances["c1"] = tt.balance
			snap.Stock["S1"] = tt.stock
			earlier := cloneSnapshot(snap)
			snap.Earlier = &earlier
			v := Check(exp, snap)
			if !v.OK() || v.BoundedCustomers != 1 || v.BoundedSKUs != 1 {
				t.Fatalf("unsettled key: %+v", v)
			}
			if v.UnsettledByKind["happy"] != 1 {
				t.Fatalf("unsettled by kind: %v", v.UnsettledByKind)
			}
		})
	}
}
