package main

import (
	"fmt"
	"slices"
	"sort"

	"github.com/choreo-saga/choreo/internal/workload"
)

// Views of what the services' APIs answer, as the checker needs them.
type (
	// OrderView is GET /orders/{id}.
	OrderView struct {
		ID           string `json:"id"`
		CustomerID   string `json:"customer_id"`
		TotalAmount  int64  `json:"total_amount"`
		Status       string `json:"status"`
		CancelReason string `json:"cancel_reason"`
	}
	// PaymentView is GET /payments/{order_id}.
	PaymentView struct {
		OrderID    string `json:"order_id"`
		CustomerID string `json:"customer_id"`
		Amount     int64  `json:"amount"`
		Status     string `json:"status"`
	}
	// ReservationView is GET /reservations/{order_id}.
	ReservationView struct {
		OrderID string          `json:"order_id"`
		Status  string          `json:"status"`
		Items   []workload.Item `json:"items"`
	}
	// ShipmentView is GET /shipments/{order_id}.
	ShipmentView struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
	}
	// StockView is GET /stock/{sku}.
	StockView struct {
		Available int64 `json:"available"`
		Reserved  int64 `json:"reserved"`
	}
)

// Snapshot is everything the checker read once the system was quiet. A
// nil entry in Payments, Reservations or Shipments is a 404.
type Snapshot struct {
	Orders       map[string]*OrderView       `json:"-"`
	Payments     map[string]*PaymentView     `json:"-"`
	Reservations map[string]*ReservationView `json:"-"`
	Shipments    map[string]*ShipmentView    `json:"-"`
	Balances     map[string]int64            `json:"-"`
	Stock        map[string]StockView        `json:"-"`
}

// Expectation is what the load generator knows: the requests, the order
// ids each Idempotency-Key was answered with, and the initial balances and
// stock.
type Expectation struct {
	Requests       map[string]Request  // by Idempotency-Key
	Accepted       map[string][]string // Idempotency-Key → every order id a 201 carried
	InitialBalance map[string]int64
	InitialStock   map[string]int64
	// Unsettled keys were sent but never answered with 201 or a 4xx: an
	// order may exist that the checker cannot see, so the balances and
	// stock it touches cannot be checked.
	Unsettled []string
	// ReplayRefused: keys whose replay (same request, same key) was
	// refused with a 4xx, by key.
	ReplayRefused map[string]string
}

// Violation is one thing the checker found wrong.
type Violation struct {
	Class  string `json:"class"` // lost, doubled, inconsistent
	What   string `json:"what"`
	Order  string `json:"order,omitempty"`
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail"`
}

// Verdict is the checker's result.
type Verdict struct {
	Lost         int            `json:"lost"`
	Doubled      int            `json:"doubled"`
	Inconsistent int            `json:"inconsistent"`
	Terminal     int            `json:"terminal"`
	Total        int            `json:"total"`
	Outcomes     map[string]int `json:"outcomes"`
	// Skipped balances and SKUs touched by an unsettled key.
	SkippedCustomers int         `json:"skipped_customers"`
	SkippedSKUs      int         `json:"skipped_skus"`
	Violations       []Violation `json:"violations"`
}

// OK reports whether nothing was lost, doubled or inconsistent.
func (v Verdict) OK() bool { return v.Lost == 0 && v.Doubled == 0 && v.Inconsistent == 0 }

func (v *Verdict) add(class, what, order, key, format string, args ...any) {
	switch class {
	case "lost":
		v.Lost++
	case "doubled":
		v.Doubled++
	default:
		v.Inconsistent++
	}
	v.Violations = append(v.Violations, Violation{Class: class, What: what, Order: order, Key: key, Detail: fmt.Sprintf(format, args...)})
}

// Check compares what the services answer with what the clients did: no
// accepted order left unfinished (lost), no effect applied twice and money
// and stock conserved (doubled), the four services agreeing on every
// order's outcome (inconsistent), and one order per Idempotency-Key.
func Check(exp Expectation, snap Snapshot) Verdict {
	v := Verdict{Outcomes: map[string]int{}}
	keys := make([]string, 0, len(exp.Accepted))
	for k := range exp.Accepted {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	// One order per Idempotency-Key, and every accepted order finished.
	var ids []string
	idKind := map[string]Request{}
	for _, k := range keys {
		distinct := slices.Compact(slices.Sorted(slices.Values(exp.Accepted[k])))
		if len(distinct) > 1 {
			v.add("doubled", "idempotency-key", "", k, "one Idempotency-Key created %d orders: %v", len(distinct), distinct)
		}
		for _, id := range distinct {
			ids = append(ids, id)
			idKind[id] = exp.Requests[k]
		}
	}
	for _, k := range sortedKeys(exp.ReplayRefused) {
		v.add("inconsistent", "idempotency-replay", "", k, "the same request sent again was refused: %s", exp.ReplayRefused[k])
	}
	v.Total = len(ids)
	for _, id := range ids {
		o := snap.Orders[id]
		if o == nil {
			v.add("lost", "order-missing", id, idKind[id].Key, "accepted order not found")
			continue
		}
		if o.Status != "COMPLETED" && o.Status != "CANCELLED" {
			v.add("lost", "not-terminal", id, idKind[id].Key, "order still %s", o.Status)
			continue
		}
		v.Terminal++
		outcome := o.Status
		if o.CancelReason != "" {
			outcome += "/" + o.CancelReason
		}
		v.Outcomes[outcome]++
		checkOrder(&v, idKind[id], o, snap.Payments[id], snap.Reservations[id], snap.Shipments[id])
	}

	// Money and stock conservation, except where an unsettled key may hide
	// an order.
	skipCust, skipSKU := map[string]bool{}, map[string]bool{}
	for _, k := range exp.Unsettled {
		r := exp.Requests[k]
		skipCust[r.Customer] = true
		for _, it := range r.Items {
			skipSKU[it.SKU] = true
		}
	}
	debits := map[string]int64{}
	reserved := map[string]int64{}
	for _, id := range ids {
		if p := snap.Payments[id]; p != nil && p.Status == "COMPLETED" {
			debits[p.CustomerID] += p.Amount
		}
		if r := snap.Reservations[id]; r != nil && r.Status == "RESERVED" {
			for _, it := range r.Items {
				reserved[it.SKU] += it.Quantity
			}
		}
	}
	for _, c := range sortedKeys(exp.InitialBalance) {
		if skipCust[c] {
			v.SkippedCustomers++
			continue
		}
		got, ok := snap.Balances[c]
		want := exp.InitialBalance[c] - debits[c]
		if !ok {
			v.add("inconsistent", "account-missing", "", "", "account %s not found", c)
		} else if got != want {
			v.add("doubled", "money", "", "", "account %s: balance %d, want %d (initial %d − completed payments %d): %+d not conserved",
				c, got, want, exp.InitialBalance[c], debits[c], got-want)
		}
	}
	for _, s := range sortedKeys(exp.InitialStock) {
		if skipSKU[s] {
			v.SkippedSKUs++
			continue
		}
		st, ok := snap.Stock[s]
		switch {
		case !ok:
			v.add("inconsistent", "sku-missing", "", "", "SKU %s not found", s)
		case st.Available+st.Reserved != exp.InitialStock[s]:
			v.add("doubled", "stock", "", "", "SKU %s: available %d + reserved %d = %d, want %d: not conserved",
				s, st.Available, st.Reserved, st.Available+st.Reserved, exp.InitialStock[s])
		case st.Reserved != reserved[s]:
			v.add("doubled", "stock-reserved", "", "", "SKU %s: reserved %d, but active reservations hold %d",
				s, st.Reserved, reserved[s])
		}
	}
	return v
}

// checkOrder checks that the other services agree with a finished order,
// and that it ended as its request's kind says it must.
func checkOrder(v *Verdict, req Request, o *OrderView, p *PaymentView, r *ReservationView, s *ShipmentView) {
	status := func(x any) string {
		switch x := x.(type) {
		case *PaymentView:
			if x != nil {
				return x.Status
			}
		case *ReservationView:
			if x != nil {
				return x.Status
			}
		case *ShipmentView:
			if x != nil {
				return x.Status
			}
		}
		return "absent"
	}
	ps, rs, ss := status(p), status(r), status(s)
	bad := func(format string, args ...any) {
		v.add("inconsistent", "cross-service", o.ID, req.Key, "order %s/%s but "+format, append([]any{o.Status, o.CancelReason}, args...)...)
	}
	if p != nil && (p.Amount != o.TotalAmount || p.CustomerID != o.CustomerID) {
		bad("payment of %d by %s for an order of %d by %s", p.Amount, p.CustomerID, o.TotalAmount, o.CustomerID)
	}
	switch o.Status {
	case "COMPLETED":
		if ps != "COMPLETED" || rs != "RESERVED" || ss != "SCHEDULED" {
			bad("payment %s, reservation %s, shipment %s (want COMPLETED, RESERVED, SCHEDULED)", ps, rs, ss)
		}
	case "CANCELLED":
		if ps == "COMPLETED" || rs == "RESERVED" || ss == "SCHEDULED" {
			bad("payment %s, reservation %s, shipment %s (a step not compensated)", ps, rs, ss)
			break
		}
		var want [3]string
		switch o.CancelReason {
		case "payment_declined":
			want = [3]string{"DECLINED", "absent", "absent"}
		case "out_of_stock":
			want = [3]string{"REFUNDED", "REJECTED", "absent"}
		case "shipping_unavailable":
			want = [3]string{"REFUNDED", "RELEASED", "FAILED"}
		default:
			bad("an unknown reason")
			return
		}
		if [3]string{ps, rs, ss} != want {
			bad("payment %s, reservation %s, shipment %s (want %s, %s, %s)", ps, rs, ss, want[0], want[1], want[2])
		}
	}
	if want := req.Kind.Outcome(); want != "" {
		got := o.Status
		if o.CancelReason != "" {
			got += "/" + o.CancelReason
		}
		if got != want {
			v.add("inconsistent", "unexpected-outcome", o.ID, req.Key, "a %s order ended %s, want %s", req.Kind, got, want)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
