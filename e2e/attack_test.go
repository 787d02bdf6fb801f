package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/park"
)

// TestAttack is the battery of docs/security.md: each attack an outsider,
// a customer or a compromised service could try on the running system, in
// its default configuration. Each is refused, and no row it aimed at
// changed, in any of the four databases.
func TestAttack(t *testing.T) {
	victim, attacker := newFixture(t, 10000, 10), newFixture(t, 10000, 10)
	o := createOrder(t, victim.order(1, 1000, "JP"))
	wantOrder(t, o.ID, "COMPLETED", "")
	w := aimedAt{customers: []string{victim.customer, attacker.customer}, skus: []string{victim.sku, attacker.sku}}
	before := w.read(t)

	anyone := map[string]string{"Authorization": ""}
	bearerOf := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	attackerTok := bearerOf(customerToken(t, attacker.customer))
	victimOrder := services["order"].baseURL + "/orders/" + o.ID
	newOrder := mustJSON(t, victim.order(1, 1000, "JP"))

	other, err := testenv.NewTokens(t.TempDir()) // a key the services never trusted
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name, method, url string
		body              []byte
		headers           map[string]string
		want              int
	}{
		{"NoToken", "POST", services["order"].baseURL + "/orders", newOrder, anyone, http.StatusUnauthorized},
		{"NoTokenRead", "GET", victimOrder, nil, anyone, http.StatusUnauthorized},
		{"ExpiredToken", "POST", services["order"].baseURL + "/orders", newOrder, bearerOf(tokens.Expired(t, victim.customer, false)), http.StatusUnauthorized},
		{"WronglySignedToken", "POST", services["order"].baseURL + "/orders", newOrder, bearerOf(other.Customer(t, victim.customer)), http.StatusUnauthorized},
		{"WronglySignedOperator", "PUT", services["payment"].baseURL + "/accounts/" + attacker.customer, []byte(`{"balance":9999999}`), bearerOf(other.Operator(t)), http.StatusUnauthorized},
		{"WrongAudience", "GET", victimOrder, nil, bearerOf(tokens.Sign(t, bearer.Token{Issuer: tokens.Auth().Issuer, Audience: "someone-else", Subject: victim.customer, TTL: time.Hour})), http.StatusUnauthorized},
		{"AnotherCustomersOrderRead", "GET", victimOrder, nil, attackerTok, http.StatusNotFound},
		{"AnotherCustomersOrderCancel", "POST", victimOrder + "/cancel", nil, attackerTok, http.StatusNotFound},
		{"OrderInAnotherCustomersName", "POST", services["order"].baseURL + "/orders", newOrder, attackerTok, http.StatusForbidden},
		{"CustomerTokenOnBalances", "PUT", services["payment"].baseURL + "/accounts/" + attacker.customer, []byte(`{"balance":9999999}`), attackerTok, http.StatusForbidden},
		{"CustomerTokenOnDeposits", "POST", services["payment"].baseURL + "/accounts/" + attacker.customer + "/deposits", []byte(`{"amount":9999999}`), attackerTok, http.StatusForbidden},
		{"CustomerTokenOnAnothersBalance", "GET", services["payment"].baseURL + "/accounts/" + victim.customer, nil, attackerTok, http.StatusForbidden},
		{"CustomerTokenOnStock", "PUT", services["inventory"].baseURL + "/stock/" + victim.sku, []byte(`{"available":0}`), attackerTok, http.StatusForbidden},
		{"CustomerTokenOnRestock", "POST", services["inventory"].baseURL + "/stock/" + victim.sku + "/restock", []byte(`{"quantity":1000}`), attackerTok, http.StatusForbidden},
		{"CustomerTokenOnAdmin", "POST", services["payment"].baseURL + "/admin/parked/release?order=" + o.ID, nil, map[string]string{"Authorization": attackerTok["Authorization"], "X-Choreo-Admin": "e2e"}, http.StatusForbidden},
		{"AdminWithoutCredential", "POST", services["payment"].baseURL + "/admin/parked/release?order=" + o.ID, nil, map[string]string{"Authorization": "", "X-Choreo-Admin": "e2e"}, http.StatusUnauthorized},
		// A web page the victim opens can send a simple POST with the
		// victim's cookies, never an Authorization header.
		{"CrossSiteCancel", "POST", victimOrder + "/cancel", nil,
			map[string]string{"Authorization": "", "Cookie": "session=victim", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, http.StatusUnauthorized},
		// The client never sets the price: the order service prices the
		// order from its items and refuses a total of the client's.
		{"TotalNotTheSumOfItems", "POST", services["order"].baseURL + "/orders",
			[]byte(fmt.Sprintf(`{"customer_id":%q,"items":[{"sku":%q,"quantity":1,"unit_price":1000}],"total_amount":1,"currency":"JPY","shipping_address":{"country":"JP"}}`, victim.customer, victim.sku)),
			bearerOf(customerToken(t, victim.customer)), http.StatusBadRequest},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			ct := ""
			if tt.body != nil {
				ct = "application/json"
			}
			status, h, b := do(t, tt.method, tt.url, ct, tt.body, tt.headers)
			if status != tt.want || !problemJSON(h) {
				t.Fatalf("%s %s = %d %s (%s), want a problem+json %d", tt.method, tt.url, status, h.Get("Content-Type"), b, tt.want)
			}
			if status == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", h.Get("WWW-Authenticate"))
			}
		})
	}

	t.Run("AnotherCustomersOrderList", func(t *testing.T) {
		for _, q := range []string{"", "?customer_id=" + victim.customer} {
			status, _, b := do(t, "GET", services["order"].baseURL+"/orders"+q, "", nil, attackerTok)
			if status != http.StatusOK || strings.Contains(string(b), victim.customer) || strings.Contains(string(b), o.ID) {
				t.Errorf("GET /orders%s with the attacker's token = %d %s; want 200 without the victim's orders", q, status, b)
			}
		}
	})

	// A compromised payment service holds payment's Kafka user: it may
	// write payment.events, nothing else.
	t.Run("ForgedEventUnderWrongPrincipal", func(t *testing.T) {
		forged := forge(t, o.ID, events.InventoryRejected{Reason: events.ReasonOutOfStock,
			Shortages: []events.Shortage{{SKU: victim.sku, Requested: 1, Available: 0}}})
		p, err := running.User("payment").NewSyncProducer("e2e-attacker")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_, _, err = p.SendMessage(forged(events.TopicInventory))
		if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Fatalf("payment's user writing %s: err = %v, want TopicAuthorizationFailed", events.TopicInventory, err)
		}
		// On its own topic the broker lets it through, and the consumers'
		// Guard dead-letters it: an InventoryRejected belongs on
		// inventory.events, which only inventory can write.
		msg := forged(events.TopicPayment)
		if _, _, err := p.SendMessage(msg); err != nil {
			t.Fatalf("payment's user writing its own topic: %v", err)
		}
		dlq := events.DeadLetterTopic("order")
		m := eventuallyMessages(t, dlq, o.ID, 1)[0]
		if r := header(m, park.HeaderDLQReason); !strings.Contains(r, "belongs on "+events.TopicInventory) {
			t.Fatalf("dead letter reason %q does not say it belongs on %s", r, events.TopicInventory)
		}
	})

	// A compromised order service may write order.events: an OrderCreated
	// whose total is not its items' is dead-lettered by payment, which
	// debits nothing.
	t.Run("ForgedTotalNotTheSumOfItems", func(t *testing.T) {
		// events.New refuses such a payload, so it is written by hand.
		id, eventID := uuid.NewString(), uuid.NewString()
		value := fmt.Sprintf(`{"id":%q,"type":"OrderCreated","order_id":%q,"source":"order","occurred_at":%q,`+
			`"payload":{"customer_id":%q,"items":[{"sku":%q,"quantity":5,"unit_price":1000}],"total_amount":1,"currency":"JPY","shipping_address":{"country":"JP"}}}`,
			eventID, id, time.Now().UTC().Format(time.RFC3339Nano), victim.customer, victim.sku)
		msg := &sarama.ProducerMessage{Topic: events.TopicOrder, Key: sarama.StringEncoder(id), Value: sarama.StringEncoder(value),
			Headers: []sarama.RecordHeader{
				{Key: []byte(events.HeaderEventID), Value: []byte(eventID)},
				{Key: []byte(events.HeaderEventType), Value: []byte(events.TypeOrderCreated)},
			}}
		p, err := running.User("order").NewSyncProducer("e2e-attacker")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, _, err := p.SendMessage(msg); err != nil {
			t.Fatal(err)
		}
		m := eventuallyMessages(t, events.DeadLetterTopic("payment"), id, 1)[0]
		if r := header(m, park.HeaderDLQReason); !strings.Contains(r, "total") {
			t.Fatalf("dead letter reason %q does not name the total", r)
		}
		if n := snapshot(t, "payment", `SELECT order_id FROM payments WHERE order_id = $1`, id); len(n) != 0 {
			t.Fatalf("payment recorded %v for an order whose total is not its items", n)
		}
	})

	atRest(t) // anything let through has been applied by now
	if diff := changed(before, w.read(t)); len(diff) > 0 {
		t.Errorf("an attack changed a database:\n%s", strings.Join(diff, "\n"))
	}

	// Run last: it changes the attacker's balance, once.
	t.Run("RepeatedDeposit", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": newID("deposit")}
		url := services["payment"].baseURL + "/accounts/" + attacker.customer + "/deposits"
		for i := range 3 {
			status, h, b := do(t, "POST", url, "application/json", []byte(`{"amount":500}`), key)
			if status != http.StatusOK || (i > 0) != (h.Get("Idempotent-Replayed") == "true") {
				t.Fatalf("deposit %d = %d %s (replayed %q)", i+1, status, b, h.Get("Idempotent-Replayed"))
			}
		}
		if got := balance(t, attacker.customer); got != 10500 {
			t.Fatalf("balance after one deposit sent three times = %d, want 10500", got)
		}
	})
}

// forge returns a function writing a well-formed event about orderID, as
// the service it names would, to the topic given.
func forge(t *testing.T, orderID string, p events.Payload) func(topic string) *sarama.ProducerMessage {
	t.Helper()
	e, err := events.New("attacker", orderID, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return func(topic string) *sarama.ProducerMessage {
		return &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(orderID), Value: sarama.ByteEncoder(v),
			Headers: []sarama.RecordHeader{
				{Key: []byte(events.HeaderEventID), Value: []byte(e.ID)},
				{Key: []byte(events.HeaderEventType), Value: []byte(e.Type)},
			}}
	}
}

// aimedAt is what the attacks aim at: the fixtures' customers and SKUs.
type aimedAt struct{ customers, skus []string }

// read returns every row of the four databases that belongs to w's
// customers, SKUs and their orders (the outbox rows too), as JSON, by table.
func (w aimedAt) read(t *testing.T) map[string][]string {
	t.Helper()
	customers, skus := pq.Array(w.customers), pq.Array(w.skus)
	orders := pq.Array(snapshot(t, "order", `SELECT id::text FROM orders WHERE customer_id = ANY($1)`, customers))
	queries := []struct {
		svc, table, query string
		arg               any
	}{
		{"order", "orders", `SELECT row_to_json(o)::text FROM orders o WHERE customer_id = ANY($1)`, customers},
		{"order", "outbox", `SELECT row_to_json(x)::text FROM (SELECT id, topic, value, refused_at FROM outbox WHERE convert_from(key, 'UTF8') = ANY($1) AND topic NOT LIKE '%.dlq') x`, orders},
		{"payment", "accounts", `SELECT row_to_json(a)::text FROM accounts a WHERE customer_id = ANY($1)`, customers},
		{"payment", "payments", `SELECT row_to_json(p)::text FROM payments p WHERE customer_id = ANY($1)`, customers},
		{"payment", "deposit_requests", `SELECT scope || '/' || idempotency_key FROM deposit_requests WHERE scope = ANY($1)`, customers},
		{"inventory", "stock", `SELECT row_to_json(s)::text FROM stock s WHERE sku = ANY($1)`, skus},
		{"inventory", "reservations", `SELECT row_to_json(r)::text FROM reservations r WHERE order_id = ANY($1)`, orders},
		{"inventory", "restock_requests", `SELECT scope || '/' || idempotency_key FROM restock_requests WHERE scope = ANY($1)`, skus},
		{"shipping", "shipments", `SELECT row_to_json(s)::text FROM shipments s WHERE order_id = ANY($1)`, orders},
	}
	rows := map[string][]string{}
	for _, q := range queries {
		got := snapshot(t, q.svc, q.query, q.arg)
		slices.Sort(got)
		rows[q.svc+"_db."+q.table] = got
	}
	return rows
}

// changed lists the tables whose rows differ between before and after.
func changed(before, after map[string][]string) []string {
	var tables []string
	for table, rows := range before {
		if !slices.Equal(rows, after[table]) {
			tables = append(tables, fmt.Sprintf("%s:\n  before %v\n  after  %v", table, rows, after[table]))
		}
	}
	slices.Sort(tables)
	return tables
}
