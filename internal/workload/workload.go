// Package workload describes the orders a load or chaos run places: a world
// of customers and SKUs with known balances and stock, and a seeded plan of
// orders whose outcome is decided by construction.
package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Kind is what an order is built to do; all but Happy compensate.
type Kind string

// The kinds of order.
const (
	Happy      Kind = "happy"        // paid, reserved, shipped: COMPLETED
	Declined   Kind = "declined"     // a customer without the money
	OutOfStock Kind = "out-of-stock" // one item of a SKU with no units
	Unserved   Kind = "unserved"     // a country shipping does not serve
)

// Outcome is how an order of this kind must end: its status and, when
// cancelled, its reason, e.g. "CANCELLED/out_of_stock".
func (k Kind) Outcome() string {
	switch k {
	case Happy:
		return "COMPLETED"
	case Declined:
		return "CANCELLED/insufficient_funds"
	case OutOfStock:
		return "CANCELLED/out_of_stock"
	case Unserved:
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

// Order is one order a client places, under its own Idempotency-Key.
type Order struct {
	Key      string `json:"key"`
	Kind     Kind   `json:"kind"`
	Customer string `json:"customer_id"`
	Items    []Item `json:"items"`
	Country  string `json:"country"`
}

// Body is the POST /orders request body for o.
func (o Order) Body() map[string]any {
	return map[string]any{
		"customer_id":      o.Customer,
		"items":            o.Items,
		"currency":         "JPY",
		"shipping_address": map[string]string{"country": o.Country, "postal_code": "100-0001", "line1": "1-1 Chiyoda"},
	}
}

// World is the customers and SKUs a run sets up, with their initial
// balances and units. Rich customers and stocked SKUs have far more than
// any run needs, so an order's outcome depends only on its kind.
type World struct {
	Rich, Poor     []string
	Stocked, Empty []string
	Balance        map[string]int64
	Stock          map[string]int64
}

// Amounts of a world: the rich can pay for everything, the poor for
// nothing (every order costs at least MinPrice).
const (
	RichBalance  = 1_000_000_000_000
	PoorBalance  = 50
	StockedUnits = 1_000_000_000
	MinPrice     = 100
)

// NewWorld names customers and SKUs for a run (prefix keeps runs apart
// when the databases are reused). customers and skus are the rich
// customers and stocked SKUs the happy orders spread over — 1 and 1 make
// every order contend for one balance and one stock row, a hot key — plus
// a tenth as many (at least one) poor customers and empty SKUs.
func NewWorld(prefix string, customers, skus int) World {
	w := World{Balance: map[string]int64{}, Stock: map[string]int64{}}
	// add names n (at least one) of a kind, prefix-kind0…, into names,
	// each starting with amount in amounts.
	add := func(names *[]string, amounts map[string]int64, kind string, n int, amount int64) {
		for i := range max(1, n) {
			name := fmt.Sprintf("%s-%s%d", prefix, kind, i)
			*names = append(*names, name)
			amounts[name] = amount
		}
	}
	add(&w.Rich, w.Balance, "c", customers, RichBalance)
	add(&w.Poor, w.Balance, "p", customers/10, PoorBalance)
	add(&w.Stocked, w.Stock, "S", skus, StockedUnits)
	add(&w.Empty, w.Stock, "X", skus/10, 0)
	return w
}

// Served are countries shipping serves by default; unserved, some it
// does not.
var (
	served   = []string{"JP", "US", "GB", "DE", "FR"}
	unserved = []string{"BR", "AU", "IN"}
)

// Mix is the share of each compensating kind, in percent; the rest are
// happy.
type Mix struct {
	Declined, OutOfStock, Unserved int
}

// DefaultMix: a fifth of the orders compensate.
var DefaultMix = Mix{Declined: 7, OutOfStock: 7, Unserved: 6}

// Validate reports a mix whose shares are negative or exceed 100%.
func (m Mix) Validate() error {
	if m.Declined < 0 || m.OutOfStock < 0 || m.Unserved < 0 || m.Declined+m.OutOfStock+m.Unserved > 100 {
		return fmt.Errorf("mix %+v: shares must be >= 0 and sum to at most 100", m)
	}
	return nil
}

// Planner deals a seeded sequence of orders for a world: kinds in the
// proportions of a Mix, happy orders spread uniformly over the rich
// customers and stocked SKUs (one or two lines each). It is not safe for
// concurrent use.
type Planner struct {
	r      *rand.Rand
	prefix string
	w      World
	mix    Mix
	n      int
}

// NewPlanner returns a Planner whose sequence depends only on seed, w and
// mix; prefix names the orders' Idempotency-Keys.
func NewPlanner(seed int64, prefix string, w World, mix Mix) *Planner {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6f7264657273)) //nolint:gosec // a seeded mix, not a secret
	return &Planner{r: r, prefix: prefix, w: w, mix: mix}
}

// Next returns the next order of the sequence.
func (p *Planner) Next() Order {
	pick := func(s []string) string { return s[p.r.IntN(len(s))] }
	var items []Item
	seen := map[string]bool{}
	for range 1 + p.r.IntN(2) {
		s := pick(p.w.Stocked)
		if seen[s] {
			continue
		}
		seen[s] = true
		items = append(items, Item{SKU: s, Quantity: 1 + p.r.Int64N(3), UnitPrice: MinPrice + p.r.Int64N(4900)})
	}
	o := Order{Key: fmt.Sprintf("%s-%06d", p.prefix, p.n), Customer: pick(p.w.Rich), Items: items, Country: pick(served)}
	p.n++
	m := p.mix
	switch x := p.r.IntN(100); {
	case x < m.Declined:
		o.Kind, o.Customer = Declined, pick(p.w.Poor)
	case x < m.Declined+m.OutOfStock:
		o.Kind = OutOfStock
		o.Items = append(o.Items, Item{SKU: pick(p.w.Empty), Quantity: 1, UnitPrice: MinPrice})
	case x < m.Declined+m.OutOfStock+m.Unserved:
		o.Kind, o.Country = Unserved, pick(unserved)
	default:
		o.Kind = Happy
	}
	return o
}

// Plan returns the first n orders of NewPlanner(seed, prefix, w, mix).
func Plan(seed int64, prefix string, n int, w World, mix Mix) []Order {
	p := NewPlanner(seed, prefix, w, mix)
	orders := make([]Order, n)
	for i := range orders {
		orders[i] = p.Next()
	}
	return orders
}

// ParseMix reads a mix such as "declined=7,out-of-stock=7,unserved=6";
// kinds left out get 0, and "default" is DefaultMix.
func ParseMix(s string) (Mix, error) {
	if s == "default" {
		return DefaultMix, nil
	}
	var m Mix
	if s == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(val)
		if !ok || err != nil {
			return Mix{}, fmt.Errorf("mix %q: %q is not kind=percent", s, part)
		}
		switch Kind(name) {
		case Declined:
			m.Declined = n
		case OutOfStock:
			m.OutOfStock = n
		case Unserved:
			m.Unserved = n
		default:
			return Mix{}, fmt.Errorf("mix %q: unknown kind %q (declined, out-of-stock, unserved)", s, name)
		}
	}
	return m, m.Validate()
}
