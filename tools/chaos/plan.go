package main

import (
	"fmt"
	"math/rand/v2"
)

// OrderKind is what an order is built to do; all but KindHappy compensate.
type OrderKind string

// The order mix.
const (
	OrderHappy      OrderKind = "happy"        // paid, reserved, shipped: COMPLETED
	OrderDeclined   OrderKind = "declined"     // a customer without the money
	OrderOutOfStock OrderKind = "out-of-stock" // one item of a SKU with no units
	OrderUnserved   OrderKind = "unserved"     // a country shipping does not serve
)

// Outcome is how an order of this kind must end.
func (k OrderKind) Outcome() string {
	switch k {
	case OrderHappy:
		return "COMPLETED"
	case OrderDeclined:
		return "CANCELLED/payment_declined"
	case OrderOutOfStock:
		return "CANCELLED/out_of_stock"
	case OrderUnserved:
		return "CANCELLED/shipping_unavailable"
	}
	return ""
}

// Item is one line of an order.
type Item struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unit_price"`
}

// Request is one order a client places, under its own Idempotency-Key.
type Request struct {
	Key      string    `json:"key"`
	Kind     OrderKind `json:"kind"`
	Customer string    `json:"customer_id"`
	Items    []Item    `json:"items"`
	Country  string    `json:"country"`
	// Instance is the order instance (1-based) the first attempt goes to.
	Instance int `json:"instance"`
	// Replay: once answered, the client sends the request again on the
	// other instance (one in ten).
	Replay bool `json:"replay,omitempty"`
}

// World is the customers and SKUs a run sets up, with their initial
// balances and units. Rich customers and stocked SKUs have far more than
// every order needs, so an order's outcome depends only on its kind.
type World struct {
	Rich, Poor     []string
	Stocked, Empty []string
	Balance        map[string]int64
	Stock          map[string]int64
}

// Amounts of the world: the rich can pay for everything, the poor for
// nothing (every order costs at least minPrice).
const (
	richBalance  = 1_000_000_000_000
	poorBalance  = 50
	stockedUnits = 1_000_000
	minPrice     = 100
)

// NewWorld names customers and SKUs for a run (tag keeps runs apart when
// the infrastructure is reused): about a tenth of them poor or empty.
func NewWorld(tag string, customers, skus int) World {
	w := World{Balance: map[string]int64{}, Stock: map[string]int64{}}
	poor := max(1, customers/10)
	for i := range max(1, customers-poor) {
		c := fmt.Sprintf("chaos-%s-c%d", tag, i)
		w.Rich = append(w.Rich, c)
		w.Balance[c] = richBalance
	}
	for i := range poor {
		c := fmt.Sprintf("chaos-%s-p%d", tag, i)
		w.Poor = append(w.Poor, c)
		w.Balance[c] = poorBalance
	}
	empty := max(1, skus/10)
	for i := range max(1, skus-empty) {
		s := fmt.Sprintf("CHAOS-%s-S%d", tag, i)
		w.Stocked = append(w.Stocked, s)
		w.Stock[s] = stockedUnits
	}
	for i := range empty {
		s := fmt.Sprintf("CHAOS-%s-X%d", tag, i)
		w.Empty = append(w.Empty, s)
		w.Stock[s] = 0
	}
	return w
}

// served are countries shipping serves by default; unserved, some it does not.
var (
	served   = []string{"JP", "US", "GB", "DE", "FR"}
	unserved = []string{"BR", "AU", "IN"}
)

// Plan returns n orders for world w, the same for the same seed: 80%
// happy, and 20% that compensate (7% declined, 7% out of stock, 6% to an
// unserved country), spread over the order instances.
func Plan(seed int64, tag string, n int, w World) []Request {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6f7264657273)) //nolint:gosec // a seeded mix, not a secret
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	items := func() []Item {
		var out []Item
		seen := map[string]bool{}
		for range 1 + r.IntN(2) {
			s := pick(w.Stocked)
			if seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, Item{SKU: s, Quantity: 1 + r.Int64N(3), UnitPrice: minPrice + r.Int64N(4900)})
		}
		return out
	}
	reqs := make([]Request, n)
	for i := range reqs {
		q := Request{Key: fmt.Sprintf("chaos-%s-%06d", tag, i), Instance: 1 + r.IntN(Instances),
			Customer: pick(w.Rich), Items: items(), Country: pick(served), Replay: r.IntN(10) == 0}
		switch x := r.IntN(100); {
		case x < 7:
			q.Kind, q.Customer = OrderDeclined, pick(w.Poor)
		case x < 14:
			q.Kind = OrderOutOfStock
			q.Items = append(q.Items, Item{SKU: pick(w.Empty), Quantity: 1, UnitPrice: minPrice})
		case x < 20:
			q.Kind, q.Country = OrderUnserved, pick(unserved)
		default:
			q.Kind = OrderHappy
		}
		reqs[i] = q
	}
	return reqs
}
