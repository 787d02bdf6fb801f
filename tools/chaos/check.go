package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

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
	// Rest is what the wait for the system at rest before the read found;
	// Earlier is the read before this one, which must be equal to it.
	Rest    Rest      `json:"-"`
	Earlier *Snapshot `json:"-"`
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
	// Refused: keys whose order was refused with a 4xx, by key.
	Refused map[string]string
	// Planned is how many orders the run meant to send.
	Planned int
	// Budget is how many planned orders may go without a 201.
	Budget Budget
}

// Budget is how many planned orders may be refused or left unsettled
// before the run proves too little: every planned kind is valid, so a
// refusal is a fault of the system, and an unsettled key is checked only
// within bounds.
type Budget struct {
	Refused   int `json:"refused"`
	Unsettled int `json:"unsettled"`
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
	Lost         int `json:"lost"`
	Doubled      int `json:"doubled"`
	Inconsistent int `json:"inconsistent"`
	// Unproven counts what left the run without evidence: no orders,
	// refused or unsettled ones beyond the budget, a snapshot not at rest.
	Unproven int            `json:"unproven"`
	Terminal int            `json:"terminal"`
	Total    int            `json:"total"`
	Outcomes map[string]int `json:"outcomes"`
	// Refused and unsettled planned orders, by kind.
	RefusedByKind   map[string]int `json:"refused_by_kind,omitempty"`
	UnsettledByKind map[string]int `json:"unsettled_by_kind,omitempty"`
	// Balances and SKUs touched by an unsettled key, checked within the
	// bounds of its order having had its effects once or not at all.
	BoundedCustomers int         `json:"bounded_customers"`
	BoundedSKUs      int         `json:"bounded_skus"`
	Violations       []Violation `json:"violations"`
}

// OK reports whether nothing was lost, doubled or inconsistent, and the
// run proved it: some orders checked, every one of them terminal.
func (v Verdict) OK() bool {
	return v.Lost == 0 && v.Doubled == 0 && v.Inconsistent == 0 && v.Unproven == 0 &&
		v.Total > 0 && v.Terminal == v.Total
}

func (v *Verdict) add(class, what, order, key, format string, args ...any) {
	switch class {
	case "lost":
		v.Lost++
	case "doubled":
		v.Doubled++
	case "unproven":
		v.Unproven++
	default:
		v.Inconsistent++
	}
	v.Violations = append(v.Violations, Violation{Class: class, What: what, Order: order, Key: key, Detail: fmt.Sprintf(format, args...)})
}

// Check compares what the services answer with what the clients did: no
// accepted order left unfinished (lost), no effect applied twice and money
// and stock conserved (doubled), the four services agreeing on every
// order's outcome (inconsistent), and one order per Idempotency-Key. The
// money and stock each order moves are the client's — its items and
// prices as sent — not what a service recorded. A run that checked no
// order, or left more planned orders refused or unsettled than its budget,
// is unproven.
func Check(exp Expectation, snap Snapshot) Verdict {
	v := Verdict{Outcomes: map[string]int{}, RefusedByKind: map[string]int{}, UnsettledByKind: map[string]int{}}
	keys := sortedKeys(exp.Accepted)

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
	// Money and stock are checked per customer and SKU of the world: an
	// accepted order outside it would escape those checks.
	for _, k := range keys {
		r := exp.Requests[k]
		if _, ok := exp.InitialBalance[r.Customer]; !ok {
			v.add("unproven", "not-in-world", "", k, "customer %s is not in the world: its balance is never checked", r.Customer)
		}
		for _, it := range r.Items {
			if _, ok := exp.InitialStock[it.SKU]; !ok {
				v.add("unproven", "not-in-world", "", k, "SKU %s is not in the world: its stock is never checked", it.SKU)
			}
		}
	}
	v.Total = len(ids)
	// What the client knows each finished order moved: its customer paid
	// the request's total and its items are held, if it completed.
	debits := map[string]int64{}
	reserved := map[string]int64{}
	for _, id := range ids {
		req := idKind[id]
		o := snap.Orders[id]
		if o == nil {
			v.add("lost", "order-missing", id, req.Key, "accepted order not found")
			continue
		}
		if o.Status != "COMPLETED" && o.Status != "CANCELLED" {
			v.add("lost", "not-terminal", id, req.Key, "order still %s", o.Status)
			continue
		}
		v.Terminal++
		outcome := o.Status
		if o.CancelReason != "" {
			outcome += "/" + o.CancelReason
		}
		v.Outcomes[outcome]++
		checkOrder(&v, req, o, snap.Payments[id], snap.Reservations[id], snap.Shipments[id])
		if o.Status == "COMPLETED" {
			debits[req.Customer] += requestTotal(req)
			for _, it := range req.Items {
				reserved[it.SKU] += it.Quantity
			}
		}
	}
	checkEvidence(&v, exp, len(keys))
	checkAtRest(&v, snap)

	// An unsettled key made one order or none: a happy one may have
	// completed once, so its customer and SKUs are checked within
	// [none, once]. Any other kind ends cancelled, having moved nothing.
	slackMoney, slackStock := map[string]int64{}, map[string]int64{}
	for _, k := range exp.Unsettled {
		if r := exp.Requests[k]; r.Kind == workload.Happy {
			slackMoney[r.Customer] += requestTotal(r)
			for _, it := range r.Items {
				slackStock[it.SKU] += it.Quantity
			}
		}
	}
	for _, c := range sortedKeys(exp.InitialBalance) {
		got, ok := snap.Balances[c]
		hi := exp.InitialBalance[c] - debits[c]
		lo := hi - slackMoney[c]
		if slackMoney[c] > 0 {
			v.BoundedCustomers++
		}
		switch {
		case !ok:
			v.add("inconsistent", "account-missing", "", "", "account %s not found", c)
		case got < lo || got > hi:
			want := fmt.Sprint(hi)
			if lo != hi {
				want = fmt.Sprintf("%d…%d", lo, hi)
			}
			v.add("doubled", "money", "", "", "account %s: balance %d, want %s (initial %d − the requests' totals of its completed orders %d): %+d not conserved",
				c, got, want, exp.InitialBalance[c], debits[c], got-hi)
		}
	}
	for _, s := range sortedKeys(exp.InitialStock) {
		st, ok := snap.Stock[s]
		lo, hi := reserved[s], reserved[s]+slackStock[s]
		if slackStock[s] > 0 {
			v.BoundedSKUs++
		}
		switch {
		case !ok:
			v.add("inconsistent", "sku-missing", "", "", "SKU %s not found", s)
		case st.Available+st.Reserved != exp.InitialStock[s]:
			v.add("doubled", "stock", "", "", "SKU %s: available %d + reserved %d = %d, want %d: not conserved",
				s, st.Available, st.Reserved, st.Available+st.Reserved, exp.InitialStock[s])
		case st.Reserved < lo || st.Reserved > hi:
			v.add("doubled", "stock-reserved", "", "", "SKU %s: reserved %d, but the completed orders requested %d (+%d that unsettled keys may hold)",
				s, st.Reserved, lo, hi-lo)
		}
	}
	return v
}

// checkEvidence fails a run that proved too little: no order checked, a
// planned order never sent, accepted orders not all terminal, refusals or
// unsettled keys beyond the budget (reported by kind).
func checkEvidence(v *Verdict, exp Expectation, accepted int) {
	if v.Total == 0 {
		v.add("unproven", "no-orders", "", "", "no accepted order to check (%d planned, %d refused, %d unsettled)",
			exp.Planned, len(exp.Refused), len(exp.Unsettled))
	}
	if sent := len(exp.Accepted) + len(exp.Refused) + len(exp.Unsettled); sent < exp.Planned {
		v.add("unproven", "not-sent", "", "", "%d of %d planned orders were never sent", exp.Planned-sent, exp.Planned)
	}
	if v.Terminal < accepted {
		v.add("unproven", "terminal-share", "", "", "%d of %d accepted orders terminal (%.1f%%), want all",
			v.Terminal, accepted, 100*float64(v.Terminal)/float64(accepted))
	}
	for _, k := range sortedKeys(exp.Refused) {
		v.RefusedByKind[string(exp.Requests[k].Kind)]++
	}
	for _, k := range exp.Unsettled {
		v.UnsettledByKind[string(exp.Requests[k].Kind)]++
	}
	if n := len(exp.Refused); n > exp.Budget.Refused {
		first := sortedKeys(exp.Refused)[0]
		v.add("unproven", "refused", "", first, "%d planned orders refused (%s), budget %d; e.g. %s",
			n, formatOutcomes(v.RefusedByKind), exp.Budget.Refused, exp.Refused[first])
	}
	if n := len(exp.Unsettled); n > exp.Budget.Unsettled {
		v.add("unproven", "unsettled", "", exp.Unsettled[0], "%d planned orders never answered (%s), budget %d",
			n, formatOutcomes(v.UnsettledByKind), exp.Budget.Unsettled)
	}
}

// checkAtRest fails a snapshot not taken at rest: the wait for empty
// outboxes and no consumer lag gave up, there was no earlier read, or the
// earlier read differs from this one.
func checkAtRest(v *Verdict, snap Snapshot) {
	if r := snap.Rest; !r.Reached {
		v.add("unproven", "not-at-rest", "", "", "outboxes unsent %v, consumer lag %v after %s: %s", r.Outbox, r.Lag, r.Waited, r.Err)
	}
	if snap.Earlier == nil {
		v.add("unproven", "one-read", "", "", "no earlier read to compare this one with")
		return
	}
	if d := diffSnapshots(*snap.Earlier, snap); len(d) > 0 {
		more := ""
		if len(d) > 5 {
			d, more = d[:5], fmt.Sprintf(" and %d more", len(d)-5)
		}
		v.add("unproven", "moved-after-read", "", "", "the system changed between two reads at rest: %s%s", strings.Join(d, "; "), more)
	}
}

// diffSnapshots lists what differs between two reads, sorted.
func diffSnapshots(a, b Snapshot) []string {
	var out []string
	diff := func(kind string, x, y any) {
		xs, ys := fmt.Sprintf("%+v", x), fmt.Sprintf("%+v", y)
		if xs != ys {
			out = append(out, fmt.Sprintf("%s: %s then %s", kind, xs, ys))
		}
	}
	for _, id := range sortedKeys(union(a.Orders, b.Orders)) {
		diff("order "+id, deref(a.Orders[id]), deref(b.Orders[id]))
		diff("payment "+id, deref(a.Payments[id]), deref(b.Payments[id]))
		diff("reservation "+id, deref(a.Reservations[id]), deref(b.Reservations[id]))
		diff("shipment "+id, deref(a.Shipments[id]), deref(b.Shipments[id]))
	}
	for _, c := range sortedKeys(union(a.Balances, b.Balances)) {
		diff("account "+c, a.Balances[c], b.Balances[c])
	}
	for _, s := range sortedKeys(union(a.Stock, b.Stock)) {
		diff("SKU "+s, a.Stock[s], b.Stock[s])
	}
	return out
}

// deref is *p, or "absent" for nil: a 404 in one read only is a change.
func deref[T any](p *T) any {
	if p == nil {
		return "absent"
	}
	return *p
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// requestTotal is what the client asked to pay: Σ quantity × unit price.
func requestTotal(r Request) int64 {
	var t int64
	for _, it := range r.Items {
		t += it.Quantity * it.UnitPrice
	}
	return t
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
	total := requestTotal(req)
	if o.TotalAmount != total || o.CustomerID != req.Customer {
		v.add("inconsistent", "client-request", o.ID, req.Key, "order of %d by %s, but the client asked for %d by %s",
			o.TotalAmount, o.CustomerID, total, req.Customer)
	}
	if p != nil && (p.Amount != total || p.CustomerID != req.Customer) {
		bad("payment of %d by %s for a request of %d by %s", p.Amount, p.CustomerID, total, req.Customer)
	}
	if r != nil && len(r.Items) > 0 && !sameItems(r.Items, req.Items) {
		v.add("inconsistent", "reservation-items", o.ID, req.Key, "reservation %s holds %v, but the client asked for %v",
			r.Status, quantities(r.Items), quantities(req.Items))
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
		case "insufficient_funds", "unknown_customer", "currency_mismatch", "payment_declined":
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

// sameItems reports whether a and b ask for the same quantity of every
// SKU, whatever their order.
func sameItems(a, b []workload.Item) bool {
	qa, qb := quantities(a), quantities(b)
	return maps.Equal(qa, qb)
}

// quantities sums items by SKU.
func quantities(items []workload.Item) map[string]int64 {
	out := map[string]int64{}
	for _, it := range items {
		out[it.SKU] += it.Quantity
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
