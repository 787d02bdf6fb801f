package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// TestCustomerTokenRefusedOnOperatorRoutes: on the running services, a
// customer's token sets no balance, deposits nothing, reads no other
// account, touches no stock, reads no payment, reservation, shipment or
// saga, and opens no /admin: each is a 403, and payment_db and
// inventory_db are as they were. The customer's own account it reads.
func TestCustomerTokenRefusedOnOperatorRoutes(t *testing.T) {
	c, other, sku := newID("c"), newID("c"), newID("SKU")
	putAccount(t, c, 1000)
	putAccount(t, other, 1000)
	putStock(t, sku, 5)
	o := createOrder(t, orderRequest{CustomerID: c, Items: []item{{SKU: sku, Quantity: 1, UnitPrice: 100}}, Currency: "JPY", ShippingAddress: address{Country: "JP"}})
	if got := waitOrder(t, o.ID); got.Status != "COMPLETED" {
		t.Fatalf("order %s is %s, want COMPLETED", o.ID, got.Status)
	}
	const accounts = `SELECT customer_id || ':' || balance || ':' || version FROM accounts WHERE customer_id IN ($1, $2) ORDER BY 1`
	const stockRow = `SELECT sku || ':' || available || ':' || reserved || ':' || version FROM stock WHERE sku = $1`
	payments, inventory := snapshot(t, "payment", accounts, c, other), snapshot(t, "inventory", stockRow, sku)

	tok := map[string]string{"Authorization": "Bearer " + customerToken(t, c)}
	tests := []struct {
		name, svc, method, path, body string
	}{
		{"SetOwnBalance", "payment", "PUT", "/accounts/" + c, `{"balance":1000000}`},
		{"DepositToOwnAccount", "payment", "POST", "/accounts/" + c + "/deposits", `{"amount":1000000}`},
		{"ReadAnothersBalance", "payment", "GET", "/accounts/" + other, ""},
		{"ReadOwnPayment", "payment", "GET", "/payments/" + o.ID, ""},
		{"SetStock", "inventory", "PUT", "/stock/" + sku, `{"available":1000}`},
		{"Restock", "inventory", "POST", "/stock/" + sku + "/restock", `{"quantity":1000}`},
		{"ReadStock", "inventory", "GET", "/stock/" + sku, ""},
		{"ReadReservation", "inventory", "GET", "/reservations/" + o.ID, ""},
		{"ReadShipment", "shipping", "GET", "/shipments/" + o.ID, ""},
		{"ReadSaga", "tracker", "GET", "/sagas/" + o.ID, ""},
		{"ListSagas", "tracker", "GET", "/sagas", ""},
	}
	for _, svc := range []string{"order", "payment", "inventory", "shipping"} {
		tests = append(tests,
			struct{ name, svc, method, path, body string }{"AdminList-" + svc, svc, "GET", "/admin/parked", ""},
			struct{ name, svc, method, path, body string }{"AdminRelease-" + svc, svc, "POST", "/admin/parked/release?order=" + o.ID, ""})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Authorization": tok["Authorization"], "X-Choreo-Admin": "e2e"}
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			status, _, b := do(t, tt.method, services[tt.svc].baseURL+tt.path, "application/json", body, hdr)
			if status != http.StatusForbidden || !strings.Contains(string(b), "operator role") {
				t.Fatalf("%s %s with a customer's token = %d %s, want 403", tt.method, tt.path, status, b)
			}
		})
	}
	t.Run("ReadOwnBalance", func(t *testing.T) {
		status, _, b := do(t, "GET", services["payment"].baseURL+"/accounts/"+c, "", nil, tok)
		if status != http.StatusOK || !strings.Contains(string(b), `"balance":900`) {
			t.Fatalf("GET own account = %d %s, want 200 with 900", status, b)
		}
	})
	t.Run("NoTokenOnEveryService", func(t *testing.T) {
		for svc, path := range map[string]string{"order": "/orders", "payment": "/accounts/" + c, "inventory": "/stock/" + sku,
			"shipping": "/shipments/" + o.ID, "tracker": "/sagas", "tracker ": "/admin/parked"} {
			status, h, _ := do(t, "GET", services[strings.TrimSpace(svc)].baseURL+path, "", nil, map[string]string{"Authorization": ""})
			if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s GET %s without a token = %d (%q), want 401 with a Bearer challenge", svc, path, status, h.Get("WWW-Authenticate"))
			}
		}
	})
	time.Sleep(200 * time.Millisecond) // a write let through would have committed by now
	if got := snapshot(t, "payment", accounts, c, other); strings.Join(got, ",") != strings.Join(payments, ",") {
		t.Errorf("payment_db accounts changed:\n%v\nwere\n%v", got, payments)
	}
	if got := snapshot(t, "inventory", stockRow, sku); strings.Join(got, ",") != strings.Join(inventory, ",") {
		t.Errorf("inventory_db stock changed:\n%v\nwere\n%v", got, inventory)
	}
}

// snapshot returns the rows query reads in svc's database, one string each.
func snapshot(t *testing.T, svc, query string, args ...any) []string {
	t.Helper()
	db, err := sqlx.Open("postgres", dbURLs[svc])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []string
	if err := db.Select(&rows, query, args...); err != nil {
		t.Fatalf("%s: %v", svc, err)
	}
	return rows
}
